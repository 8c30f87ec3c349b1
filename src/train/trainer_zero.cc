// train/trainer_zero.cc — the Trainer's ZeRO-facing members: building the sharded training state,
// the exact global gradient norm, the optimizer step with its parameter all-gather, and the memory
// accounting reported at start-up and in the metrics (docs/zero.md).
#include <sys/resource.h>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/log.h"
#include "train/trainer.h"

namespace moe4d {
namespace {

double mib(double bytes) { return bytes / (1024.0 * 1024.0); }

const char* compression_name(GradCompression c) {
  switch (c) {
    case GradCompression::kNone: return "none";
    case GradCompression::kBF16: return "bf16";
    case GradCompression::kFP16: return "fp16";
  }
  return "?";
}

}  // namespace

void Trainer::setup_zero() {
  const ParallelConfig& par = config_.parallel;
  const int stage = par.zero_stage;
  const std::vector<ChunkSpec> chunks = my_chunks();
  const int ranks[kNumParamGroups] = {pc_.dp_ep->size(), pc_.dp->size()};
  const int rank[kNumParamGroups] = {pc_.dp_ep->rank(), pc_.dp->rank()};
  zero_layout_ = std::make_unique<ZeroLayout>(params_, chunks, config_.model.num_layers, zero_bucketing(par, ranks),
                                              ranks, rank);
  grad_sync_ = std::make_unique<GradSync>(params_, pc_, *zero_layout_,
                                          GradSyncOptions{.backend = backend_.get(),
                                                          .zero_stage = stage,
                                                          .compression = config_.train.grad_compression,
                                                          .overlap = par.overlap_grad_reduce});
  // ZeRO-2/3: return the full gradient buffers' pages now (finalize touched them), before the shards
  // and the optimizer state are allocated, so that start-up does not hold both.
  grad_sync_->zero_grads();
  if (stage >= 1) {
    zero_values_ = std::make_unique<ZeroParamGatherer>(params_, pc_, *zero_layout_, stage, par.zero3_prefetch_buckets,
                                                       backend_.get());
    zero_values_->shard_from_flat();
  }
  optimizer_ =
      make_optimizer(*backend_, config_.train, stage, params_, pc_, *zero_layout_, *grad_sync_, zero_values_.get());
  // Every stage: stages 2/3 gather and reduce through the hooks; 0/1 only take the bucket cuts from
  // them, so that the blocks' weight-gradient GEMMs are cut the same way in every stage.
  zero_hooks_ = std::make_unique<ZeroLayerHooks>(stage == 3 ? zero_values_.get() : nullptr, grad_sync_.get());
  model_->set_layer_hooks(zero_hooks_.get());
}

void Trainer::begin_zero_step(int64_t step) {
  // 1-bit Adam after its warm-up reduces momenta, not gradients: this step's gradients stay local.
  // The optimizer counts the updates it made (skipped steps do not count), so ask it with that number.
  gradients_local_ = optimizer_->keeps_gradients_local(step - guard_.skipped_steps());
  grad_sync_->set_data_parallel(!gradients_local_);
  grad_sync_->zero_grads();
}

double Trainer::clip_gradients() {
  // Each rank adds the squares of the gradient elements it counts (grad_sync.h); the world sum
  // counts every element of the model exactly once in every layout and ZeRO stage.
  double sum = grad_sync_->grad_sum_squares(gradients_local_);
  pc_.world->all_reduce(&sum, 1, DType::kF64, ReduceOp::kSum);
  return std::sqrt(sum);
}

void Trainer::optimizer_step(int64_t step, double lr, float grad_scale) {
  optimizer_->step(step, lr, grad_scale);
  // ZeRO 1/2: each rank updated its slices; everyone needs the full values for the next forward.
  if (zero_values_) zero_values_->gather_after_step();
}

std::map<std::string, FullTensor> Trainer::gather_parameters() {
  if (zero_values_) zero_values_->materialize_all();
  auto out = gather_full_tensors(pc_, params_, [this](int id) { return params_.value(id); });
  if (zero_values_) zero_values_->release_all();
  return out;
}

Trainer::MemoryFigures Trainer::memory_figures() const {
  MemoryFigures f;
  f.params = double(zero_values_ ? zero_values_->held_bytes() : params_.total_numel() * sizeof(float));
  f.params_peak = double(zero_values_ ? zero_values_->peak_bytes() : f.params);
  f.grads = double(grad_sync_->held_bytes());
  f.grads_peak = f.grads + double(grad_sync_->peak_transient_bytes());
  f.optimizer = double(optimizer_->state_bytes());
  f.activations = double(executor_->peak_activation_bytes());
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  f.rss_peak = double(usage.ru_maxrss) * 1024.0;
  const ZeroStateBytes formula = zero_state_bytes(config_.parallel.zero_stage, *zero_layout_);
  f.formula_params = double(formula.params);
  f.formula_grads = double(formula.grads);
  f.formula_optimizer = double(formula.optimizer);
  f.replicas = replica_buffer_bytes();
  return f;
}

nlohmann::json Trainer::memory_record() {
  // Bytes this rank holds, gathered from every rank (collective over the world).
  constexpr int kFields = 12;
  const MemoryFigures f = memory_figures();
  const double mine[kFields] = {f.params, f.params_peak, f.grads, f.grads_peak, f.optimizer, f.activations,
                                f.rss_peak, f.formula_params, f.formula_grads, f.formula_optimizer,
                                double(params_.total_numel()), f.replicas};
  std::vector<double> all(kFields * size_t(pc_.world->size()));
  pc_.world->all_gather(mine, all.data(), kFields, DType::kF64);
  nlohmann::json per_rank = nlohmann::json::array();
  for (int r = 0; r < pc_.world->size(); ++r) {
    const double* m = all.data() + kFields * size_t(r);
    per_rank.push_back({{"params_bytes", m[0]},
                        {"params_peak_bytes", m[1]},
                        {"grads_bytes", m[2]},
                        {"grads_peak_bytes", m[3]},
                        {"optimizer_bytes", m[4]},
                        {"activations_peak_bytes", m[5]},
                        {"replica_bytes", m[11]},
                        {"model_state_and_activations_bytes", m[0] + m[2] + m[4] + m[5] + m[11]},
                        {"peak_bytes", m[1] + m[3] + m[4] + m[5] + m[11]},
                        {"rss_peak_bytes", m[6]},
                        {"formula", {{"params_bytes", m[7]}, {"grads_bytes", m[8]}, {"optimizer_bytes", m[9]}}},
                        {"local_params", m[10]}});
  }
  // The largest rank's peak per category: what a card must hold during a step.
  double most[7] = {0, 0, 0, 0, 0, 0, 0};
  for (int r = 0; r < pc_.world->size(); ++r) {
    const double* m = all.data() + kFields * size_t(r);
    const double peaks[7] = {m[1], m[3], m[4], m[5], m[1] + m[3] + m[4], m[1] + m[3] + m[4] + m[5] + m[11], m[11]};
    for (int i = 0; i < 7; ++i) most[i] = std::max(most[i], peaks[i]);
  }
  nlohmann::json bucket_elements = nlohmann::json::object();
  for (ParamGroup g : {ParamGroup::kDense, ParamGroup::kExpert})
    bucket_elements[g == ParamGroup::kDense ? "dense" : "expert"] = zero_layout_->bucket_elements(g);
  return {{"zero_stage", config_.parallel.zero_stage},
          {"sequence_parallel", config_.parallel.sequence_parallel},
          {"peak_params_bytes", most[0]},
          {"peak_grads_bytes", most[1]},
          {"peak_optimizer_bytes", most[2]},
          {"peak_activations_bytes", most[3]},
          {"peak_model_state_bytes", most[4]},
          {"peak_bytes", most[5]},
          {"peak_replica_bytes", most[6]},
          {"grad_bucket_elements", bucket_elements},
          {"grad_buckets", zero_layout_->buckets().size()},
          {"zero3_prefetch_buckets", config_.parallel.zero3_prefetch_buckets},
          {"per_rank", per_rank}};
}

void Trainer::log_memory_table() {
  const nlohmann::json record = memory_record();  // collective
  if (pc_.rank != 0 || options_.quiet) return;
  const nlohmann::json& ranks = record["per_rank"];
  log_info("model state per rank (zero_stage {}, MiB; formula of docs/zero.md in brackets):",
           config_.parallel.zero_stage);
  log_info("  rank   params            grads             optimizer         total");
  // Every rank up to 16, else the rank with the largest total.
  std::vector<size_t> rows;
  if (ranks.size() <= 16) {
    for (size_t r = 0; r < ranks.size(); ++r) rows.push_back(r);
  } else {
    size_t worst = 0;
    auto total = [&](size_t r) {
      return ranks[r]["params_bytes"].get<double>() + ranks[r]["grads_bytes"].get<double>() +
             ranks[r]["optimizer_bytes"].get<double>();
    };
    for (size_t r = 1; r < ranks.size(); ++r)
      if (total(r) > total(worst)) worst = r;
    rows.push_back(worst);
  }
  for (size_t r : rows) {
    const nlohmann::json& m = ranks[r];
    const nlohmann::json& fm = m["formula"];
    const double p = m["params_bytes"], g = m["grads_bytes"], o = m["optimizer_bytes"];
    log_info("  {:>4}   {:>7.2f} [{:>7.2f}] {:>7.2f} [{:>7.2f}] {:>7.2f} [{:>7.2f}] {:>8.2f}", r, mib(p),
             mib(fm["params_bytes"].get<double>()), mib(g), mib(fm["grads_bytes"].get<double>()), mib(o),
             mib(fm["optimizer_bytes"].get<double>()), mib(p + g + o));
  }
}

nlohmann::json Trainer::zero_record() {
  // This rank's data-parallel payload of the step (rank 0's, in the metrics file): gradients handed
  // to reductions, parameters sent in all-gathers, the optimizer's own traffic (1-bit Adam).
  const int64_t now[3] = {grad_sync_->payload_bytes(), zero_values_ ? zero_values_->payload_bytes() : 0,
                          optimizer_->payload_bytes()};
  nlohmann::json rec = {{"stage", config_.parallel.zero_stage},
                        {"grad_compression", compression_name(config_.train.grad_compression)},
                        {"optimizer", optimizer_->name()},
                        {"gradients_local", gradients_local_},
                        {"grad_payload_bytes", now[0] - zero_payload_seen_[0]},
                        {"param_gather_payload_bytes", now[1] - zero_payload_seen_[1]},
                        {"optimizer_payload_bytes", now[2] - zero_payload_seen_[2]}};
  for (int i = 0; i < 3; ++i) zero_payload_seen_[i] = now[i];
  return rec;
}

}  // namespace moe4d
