// train/step_metrics.cc — StepTotals, the communication snapshot, step_record and ProgressLog (see
// the header).
#include "train/step_metrics.h"

#include <algorithm>
#include <ctime>
#include <numeric>

#include <fmt/format.h>

#include "model/model_flops.h"
#include "train/metrics.h"
#include "train/training_data.h"

namespace moe4d {

void StepTotals::all_reduce(Communicator& world) {
  constexpr size_t kScalars = 5;
  std::vector<double> packed = {ce_sum, aux_loss, z_loss, dropped_slots, routed_slots};
  packed.insert(packed.end(), load.begin(), load.end());
  packed.insert(packed.end(), replication.begin(), replication.end());
  world.all_reduce(packed.data(), packed.size(), DType::kF64, ReduceOp::kSum);
  ce_sum = packed[0];
  aux_loss = packed[1];
  z_loss = packed[2];
  dropped_slots = packed[3];
  routed_slots = packed[4];
  const auto load_end = packed.begin() + kScalars + load.size();  // host values, back into their fields
  std::copy(packed.begin() + kScalars, load_end, load.begin());
  std::copy(load_end, packed.end(), replication.begin());
}

CommSnapshot comm_snapshot(ParallelContext& pc) {
  CommSnapshot s;
  s.tp = pc.tp->stats();
  s.ep = pc.ep->stats();
  s.dp = pc.dp->stats();
  s.dp.add(pc.dp_ep->stats());
  for (HierarchicalAllReduce* sync : {pc.dp_sync.get(), pc.dp_ep_sync.get()}) {
    if (!sync) continue;
    for (Communicator* stage : sync->stage_communicators()) s.dp.add(stage->stats());
  }
  s.pp = pc.pp->stats();
  if (pc.embed) s.pp.add(pc.embed->stats());
  s.other = pc.world->stats();
  if (pc.cp) s.other.add(pc.cp->stats());  // context parallelism's K/V exchange and router statistics
  return s;
}

namespace {
nlohmann::json group_record(const CommStats& after, const CommStats& before, double* exposed_total) {
  double busy = 0, exposed = 0, bytes = 0, intra = 0, inter = 0;
  for (int op = 0; op < static_cast<int>(CommOp::kCount); ++op) {
    busy += after.ops[op].busy_seconds - before.ops[op].busy_seconds;
    exposed += after.ops[op].exposed_seconds - before.ops[op].exposed_seconds;
    bytes += double(after.ops[op].bytes - before.ops[op].bytes);
    intra += double(after.ops[op].bytes_intra_node - before.ops[op].bytes_intra_node);
    inter += double(after.ops[op].bytes_inter_node - before.ops[op].bytes_inter_node);
  }
  *exposed_total += exposed;
  return {{"busy_s", busy},           {"exposed_s", exposed},           {"bytes", bytes},
          {"bytes_intra_node", intra}, {"bytes_inter_node", inter}};
}
}  // namespace

nlohmann::json comm_record(const CommSnapshot& after, const CommSnapshot& before, double* exposed_seconds) {
  *exposed_seconds = 0;
  return {{"tp", group_record(after.tp, before.tp, exposed_seconds)},
          {"ep", group_record(after.ep, before.ep, exposed_seconds)},
          {"dp", group_record(after.dp, before.dp, exposed_seconds)},
          {"pp", group_record(after.pp, before.pp, exposed_seconds)},
          {"other", group_record(after.other, before.other, exposed_seconds)}};
}

nlohmann::json step_record(const Config& config, const StepResult& r, const StepTotals& totals,
                           const std::vector<int>& moe_layers, int world_size, const BlendedDataset& data) {
  const double tokens = double(config.train.global_batch_size) * config.model.seq_length;
  nlohmann::json rec = {{"step", r.step},          {"loss", r.loss},        {"total_loss", r.total_loss},
                        {"lr", r.lr},              {"grad_norm", r.grad_norm}, {"tokens", tokens},
                        {"tokens_per_s", tokens / r.seconds},
                        {"model_tflops_per_s", tokens * model_flops_per_token(config.model) / r.seconds / 1e12}};
  if (config.train.peak_tflops > 0)
    rec["mfu"] = rec["model_tflops_per_s"].get<double>() / (double(world_size) * config.train.peak_tflops);
  rec["data"] = blend_step_record(data, config.train.seed, r.step, config.model.seq_length);
  if (config.model.is_moe()) {
    const int E = config.model.moe.num_experts;
    nlohmann::json layers = nlohmann::json::array();
    for (size_t i = 0; i < moe_layers.size(); ++i) {
      const auto begin = totals.load.begin() + i * E, end = begin + E;
      const double mean = std::accumulate(begin, end, 0.0) / E;
      const double mx = *std::max_element(begin, end), mn = *std::min_element(begin, end);
      layers.push_back({{"layer", moe_layers[i]}, {"tokens_per_expert", std::vector<double>(begin, end)},
                        {"min", mn}, {"mean", mean}, {"max", mx}, {"imbalance", mean > 0 ? mx / mean : 0.0}});
    }
    const double dropped = totals.dropped_slots, routed = totals.routed_slots;
    rec["moe"] = {{"aux_loss", r.aux_loss}, {"z_loss", r.z_loss}, {"dropped_slots", dropped},
                  {"dropped_fraction", routed > 0 ? dropped / routed : 0.0}, {"layers", layers}};
  }
  return rec;
}

void ProgressLog::add(const StepResult& r) {
  steps_ += 1;
  loss_ += r.loss;
  aux_ += r.aux_loss;
  grad_norm_ += r.grad_norm;
  seconds_ += r.seconds;
  tokens_ += r.record["tokens"].get<double>();
}

void ProgressLog::print(const StepResult& r, int64_t step, int64_t stop, int64_t first, double elapsed,
                        int64_t skipped_steps, bool dynamic_loss_scale) {
  const double n = std::max(steps_, 1);
  const int window_steps = steps_;
  const double loss = loss_ / n, aux = aux_ / n, grad_norm = grad_norm_ / n, step_s = seconds_ / n;
  const double tokens_per_s = seconds_ > 0 ? tokens_ / seconds_ : 0.0;
  steps_ = 0;
  loss_ = aux_ = grad_norm_ = seconds_ = tokens_ = 0;
  const double eta = elapsed / double(step - first) * double(stop - step);
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &utc);
  const int total = config_.train.steps;
  if (json_) {
    nlohmann::json line = {{"time", stamp},          {"step", step},          {"steps", total},
                           {"interval_steps", window_steps}, {"loss", loss},  {"lr", r.lr},
                           {"grad_norm", grad_norm}, {"tokens_per_s", tokens_per_s},
                           {"step_ms", step_s * 1e3}, {"eta_s", eta}, {"skipped_steps", skipped_steps}};
    if (config_.model.is_moe()) line["aux_loss"] = aux;
    if (r.record.contains("val_loss")) line["val_loss"] = r.record["val_loss"];
    if (dynamic_loss_scale) line["loss_scale"] = r.loss_scale;
    fmt::print("{}\n", line.dump());
  } else {
    std::string line = fmt::format("{} step {:>5}/{} | loss {:.4f}", stamp, step, total, loss);
    // The sum over the MoE layers (Megatron logs the mean); the start of the run says so.
    if (config_.model.is_moe()) line += fmt::format(" | aux_sum {:.4f}", aux);
    if (r.record.contains("val_loss")) line += fmt::format(" | val {:.4f}", r.record["val_loss"].get<double>());
    if (dynamic_loss_scale) line += fmt::format(" | scale {:g}", r.loss_scale);
    if (r.skipped) line += fmt::format(" | skipped ({} so far)", skipped_steps);
    line += fmt::format(" | lr {:.2e} | gnorm {:.3f} | {} tok/s | {:.0f} ms/step | eta {}", r.lr, grad_norm,
                        format_count(tokens_per_s), step_s * 1e3, format_duration(eta));
    fmt::print("{}\n", line);
  }
  std::fflush(stdout);
}

}  // namespace moe4d
