#include "train/trainer.h"

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <numeric>

#include <fmt/format.h>

#include "backend/cpu_backend.h"
#include "backend/reference_backend.h"
#include "config/config_names.h"
#include "core/error.h"
#include "core/log.h"
#include "data/window_sampler.h"
#include "model/model_flops.h"
#include "train/lr_schedule.h"
#include "train/nonfinite_diagnosis.h"
#include "train/stage_partition.h"
#include "train/tensor_gather.h"
#include "train/training_data.h"
#include "trace/tensorboard_sink.h"

namespace moe4d {
namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::unique_ptr<Backend> make_backend(ComputeBackend kind) {
  switch (kind) {
    case ComputeBackend::kCpu: return std::make_unique<CpuBackend>();
    case ComputeBackend::kReference: return std::make_unique<ReferenceBackend>();
  }
  fail("train.backend: unknown backend {}", static_cast<int>(kind));
}
}  // namespace

Trainer::Trainer(const Config& config, ParallelContext& pc, TrainerOptions options)
    : progress_(config, options.json_progress),
      config_(config),
      pc_(pc),
      options_(std::move(options)),
      backend_(make_backend(config.train.backend)),
      loss_scaler_(config.train.precision, config.train.loss_scale),
      guard_(config.train.max_nonfinite_steps) {
  if (!(pc.world->device() == backend_->device()))
    fail("train.backend '{}' computes on {} but the '{}' communicator moves buffers on {}: pair a backend with a "
         "communicator of the same device", backend_->name(), backend_->device().str(), pc.world->backend(),
         pc.world->device().str());
  const ParallelConfig& par = config.parallel;
  // The CP ranks of a dense replica share its sequences (model/context_parallel.h).
  micro_batch_size_ = static_cast<int>(config.train.global_batch_size / (par.dense_replicas() * par.micro_batch_num));
  model_ = std::make_unique<Transformer>(config.model, pc, my_chunks(), params_);
  params_.finalize();
  params_.init_values(config.train.seed);
  sync_ = std::make_unique<ParameterSync>(config, pc, params_, *backend_, my_chunks(), *model_);  // ZeRO state

  if (!options_.evaluation_only)
    train_data_ = open_training_blend(config);  // checks each source's vocab_size (train/training_data.h)
  valid_data_ = open_validation_source(config);
  for (int l = 0; l < config.model.num_layers; ++l)
    if (config.model.is_moe_layer(l)) moe_layers_.push_back(l);
  for (MoeBlock* block : model_->moe_blocks())
    moe_stats_.push_back({.layer = block->layer(),
                          .tokens_per_expert = std::vector<double>(config.model.moe.num_experts, 0.0)});
  rebalancer_ = std::make_unique<ExpertRebalancer>(config, pc, *model_, moe_layers_);

  executor_ = std::make_unique<StepExecutor>(config, pc, *model_, params_, micro_batch_size_);
  if (config.train.precision != Precision::kFP32) {
    compute_ = config.train.precision == Precision::kBF16 ? DType::kBF16 : DType::kF16;
    const PrecisionGemm* gemm16 = precision_gemm();
    if (pc_.rank == 0 && !options_.quiet)
      log_info("block GEMMs: {}", gemm16 ? fmt::format("{} ({})", gemm16->implementation(), gemm16->onednn_status())
                                         : fmt::format("backend '{}'", backend_->name()));
  }
  if (options_.fault_injector) injection_ = std::make_unique<FaultInjectionHook>(*options_.fault_injector, params_);
  if (!options_.resume_from.empty()) load_checkpoint(options_.resume_from);
  else if (!config.train.init_from.empty()) load_weights(config.train.init_from);
  const std::vector<RankMemoryUse> memory = gather_rank_memory(*pc_.world, rank_memory());  // collective
  if (pc_.rank == 0 && !options_.quiet) log_memory_table(memory, config.parallel.zero_stage);

  gather_rank_hosts();
  std::string path = options_.metrics_path;
  if (path.empty()) path = config.metrics_path();
  if (pc_.rank == 0 && !options_.evaluation_only) metrics_ = MetricsWriter(path, step_);  // eval writes none
  // The trace sits next to the metrics file (collective: clock offsets between the ranks).
  if (!config.train.trace_steps.empty() && !options_.evaluation_only) {
    const std::filesystem::path dir = std::filesystem::path(path).parent_path();
    tracer_ = std::make_unique<StepTracer>(config.train.trace_steps, pc_, (dir / "trace.json.gz").string(),
                                           config.model.num_layers);
  }
  if (pc_.rank == 0 && !config.train.tensorboard_dir.empty() && !options_.evaluation_only)
    sinks_.push_back(std::make_unique<TensorBoardSink>(config.train.tensorboard_dir));
}

Trainer::~Trainer() = default;

const PrecisionGemm* Trainer::precision_gemm() const {
  auto* cpu = dynamic_cast<CpuBackend*>(backend_.get());
  return compute_ == DType::kF32 || !cpu ? nullptr : &cpu->precision_gemm(compute_);
}

// Host names of all ranks, for the slow-rank diagnosis (report/rank_times.h): fixed 64-byte slots.
void Trainer::gather_rank_hosts() {
  constexpr size_t kSlot = 64;
  char mine[kSlot] = {0};
  ::gethostname(mine, kSlot - 1);
  std::vector<char> all(kSlot * size_t(pc_.world->size()));
  pc_.world->all_gather(mine, all.data(), kSlot, DType::kU8);
  for (int r = 0; r < pc_.world->size(); ++r) rank_hosts_.emplace_back(all.data() + kSlot * r);
}

RankMemoryUse Trainer::rank_memory() const {
  RankMemoryUse m;
  sync_->add_memory(m);
  m.activations = double(executor_->peak_activation_bytes());
  m.replicas = rebalancer_->buffer_bytes();
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  m.rss_peak = double(usage.ru_maxrss) * 1024.0;
  return m;
}

// This rank's pipeline stage: one block of layers, or virtual_pipeline chunks when interleaved.
std::vector<ChunkSpec> Trainer::my_chunks() const {
  return partition_stages(config_.model, config_.parallel).chunks_of(pc_.coord.pp);
}

StepResult Trainer::train_step() {
  MOE4D_CHECK_MSG(train_data_ != nullptr, "train_step on a Trainer built with evaluation_only");
  const auto t0 = Clock::now();
  const double descheduled_before = options_.descheduled_seconds ? options_.descheduled_seconds() : 0.0;
  const ParallelConfig& par = config_.parallel;
  const int m = par.micro_batch_num, replicas = par.data_replicas();
  const int64_t step = step_ + 1;
  const CommSnapshot comm_before = comm_snapshot(pc_);
  // Traced steps: consecutive phases of the step on the compute track (train/step_tracer.h).
  const bool traced = tracer_ && tracer_->active();
  auto phase_start = t0;
  const auto phase = [&](const char* name) {
    if (!traced) return;
    const auto now = Clock::now();
    tracer_->span(name, "step", phase_start, now);
    phase_start = now;
  };
  sync_->begin_step(step - guard_.skipped_steps());  // zeroes the gradients (train/parameter_sync.h)
  rebalancer_->begin_step(params_, *backend_);
  for (MoeLayerStats& s : moe_stats_) s.reset();

  const MicroBatchFill fill = [&](int index, int* tokens, int* targets) {
    train_data_->fill_batch(config_.train.seed, step, int64_t(index) * micro_batch_size_, micro_batch_size_, tokens,
                            targets);
  };
  // fp16: the backward starts from loss x scale, so every gradient comes out `loss_scale` times too
  // large until the norm and the optimizer divide it out below. fp32 / bf16: loss_scale is 1.
  const float loss_scale = static_cast<float>(loss_scaler_.scale());
  const float micro_batch_weight = loss_scale / float(replicas * m);
  executor_->set_numerics(step_numerics(step));
  const double ce_sum = executor_->train(fill, micro_batch_weight, &moe_stats_, sync_->grad_sync());
  phase("forward/backward");
  if (traced) tracer_->add_actions(executor_->last_trace());
  sync_->grad_sync().finish();
  phase("gradient sync");
  rebalancer_->collect_replica_bytes(moe_stats_);
  MOE4D_CHECK_MSG(!precision_gemm() || precision_gemm()->calls() > 0, "train.precision is 16-bit but no block GEMM used it");

  // One world reduction carries the step's scalars and the expert load.
  const int E = std::max(config_.model.moe.num_experts, 1);
  StepTotals totals;
  totals.load.assign(moe_layers_.size() * size_t(E), 0.0);
  totals.replication.assign(moe_layers_.size() * rebalancer_->stride(), 0.0);
  if (pc_.coord.tp == 0) {
    totals.ce_sum = ce_sum;
    for (const MoeLayerStats& s : moe_stats_) {
      totals.aux_loss += s.aux_loss;
      totals.z_loss += s.z_loss;
      totals.dropped_slots += s.dropped_slots;
      totals.routed_slots += s.routed_slots;
      const size_t slot = std::find(moe_layers_.begin(), moe_layers_.end(), s.layer) - moe_layers_.begin();
      std::copy_n(s.tokens_per_expert.begin(), E, totals.load.begin() + slot * E);  // host statistics
    }
    rebalancer_->pack(moe_stats_, totals.replication.data());
  }
  totals.all_reduce(*pc_.world);
  phase("loss and load reduction");

  StepResult r;
  r.step = step;
  const double micro_batches = double(replicas) * m;
  r.loss = totals.ce_sum / micro_batches;
  r.aux_loss = totals.aux_loss / micro_batches;
  r.z_loss = totals.z_loss / micro_batches;
  r.total_loss = r.loss + config_.model.moe.aux_loss_coeff * r.aux_loss + config_.model.moe.z_loss_coeff * r.z_loss;
  r.grad_norm = sync_->reduce_grad_norm() / loss_scale;  // of the unscaled gradients
  phase("gradient norm");
  // A non-finite gradient element anywhere makes the reduced norm non-finite: the norm's one world
  // reduction is every rank's overflow check. A skipped step leaves parameters, AdamW state and
  // router biases untouched; the data position still advances with the step number.
  r.loss_scale = loss_scale;
  r.overflow = !std::isfinite(r.grad_norm);
  const StepVerdict verdict =
      guard_.assess(std::isfinite(r.total_loss), !r.overflow, loss_scaler_.can_absorb_overflow());
  loss_scaler_.update(r.overflow);
  if (verdict == StepVerdict::kStop) stop_nonfinite(step, fill, micro_batch_weight);
  r.skipped = verdict == StepVerdict::kSkip;
  const double clip = config_.train.grad_clip;
  const float grad_scale = clip > 0 && r.grad_norm > clip ? float(clip / (r.grad_norm + 1e-6)) : 1.0f;
  r.lr = learning_rate(int(step), config_.train.steps, config_.train.warmup_steps, config_.train.lr,
                       config_.train.min_lr);
  // The loss scale is divided out in the optimizer's gradient multiplier (exact: a power of two);
  // AdamW's bias correction counts the updates actually made.
  if (!r.skipped) sync_->optimizer_step(step - guard_.skipped_steps(), r.lr, grad_scale / loss_scale);
  phase("optimizer");
  if (!r.skipped && config_.model.moe.router_bias_update_rate > 0) update_router_bias(totals.load);
  rebalancer_->rebalance(totals.load, step);
  step_ = step;
  const auto t_end = Clock::now();
  r.seconds = std::chrono::duration<double>(t_end - t0).count();
  if (traced) {
    phase_start = std::min(phase_start, t_end);
    tracer_->span("router bias", "step", phase_start, t_end);
    tracer_->span(fmt::format("step {}", step), "step", t0, t_end, {{"step_s", r.seconds}});
  }

  // Timing breakdown.
  double exposed = 0;
  nlohmann::json comm = comm_record(comm_snapshot(pc_), comm_before, &exposed);
  // Traced steps: the blocked time of each group split into waiting for the last member and transfer.
  if (traced) {
    const nlohmann::json splits = tracer_->comm_split();
    for (const auto& [group, split] : splits.items())
      if (comm.contains(group)) comm[group].update(split);
  }
  r.record = step_record(config_, r, totals, moe_layers_, pc_.grid.world_size(), *train_data_);
  if (rebalancer_->active()) r.record["moe"]["replication"] = rebalancer_->record(totals.replication.data());
  r.record["loss_scale"] = r.loss_scale;
  r.record["overflow"] = r.overflow;
  r.record["skipped"] = r.skipped;
  r.record["skipped_steps"] = guard_.skipped_steps();
  r.record["time"] = {{"step_s", r.seconds}, {"compute_s", r.seconds - exposed}, {"comm_exposed_s", exposed},
                      {"comm", comm}};
  // Every rank's compute time and time waiting for a CPU (16 bytes per rank per step), so that a
  // slow machine shows by name and an oversubscribed one as descheduling rather than communication.
  const double descheduled = options_.descheduled_seconds ? options_.descheduled_seconds() - descheduled_before
                                                          : std::nan("");
  struct RankTime {
    double compute_s, descheduled_s;
  };
  const RankTime mine{r.seconds - exposed, descheduled};
  std::vector<RankTime> times(size_t(pc_.world->size()));
  pc_.world->all_gather(&mine, times.data(), 2, DType::kF64);
  nlohmann::json rank_compute = nlohmann::json::array(), rank_descheduled = nlohmann::json::array();
  for (const RankTime& t : times) {
    rank_compute.push_back(t.compute_s);
    rank_descheduled.push_back(std::isfinite(t.descheduled_s) ? nlohmann::json(t.descheduled_s) : nlohmann::json());
  }
  r.record["time"]["rank_compute_s"] = rank_compute;
  r.record["time"]["rank_descheduled_s"] = rank_descheduled;
  if (!rank_hosts_written_) {
    if (options_.run_facts.is_object()) r.record.update(options_.run_facts);
    r.record["rank_hosts"] = rank_hosts_;
    rank_hosts_written_ = true;
  }
  // Pipeline schedule, bubble and activation memory (collective over the pipeline group).
  executor_->gather_step_metrics(r.record, step, config_.train.steps);
  r.record["memory"] = memory_record(gather_rank_memory(*pc_.world, rank_memory()), config_.parallel, sync_->layout());
  r.record["zero"] = sync_->take_record();
  return r;
}

void Trainer::update_router_bias(const std::vector<double>& load) {
  // DeepSeek-V3 aux-loss-free balancing: raise the selection bias of under-loaded experts and lower
  // it for over-loaded ones by a fixed step. Every rank sees the same global load, so biases agree.
  const int E = config_.model.moe.num_experts;
  const float rate = static_cast<float>(config_.model.moe.router_bias_update_rate);
  for (MoeBlock* block : model_->moe_blocks()) {
    const size_t slot = std::find(moe_layers_.begin(), moe_layers_.end(), block->layer()) - moe_layers_.begin();
    const double mean = std::accumulate(load.begin() + slot * E, load.begin() + (slot + 1) * E, 0.0) / E;
    for (int e = 0; e < E; ++e) {
      const double l = load[slot * E + e];
      block->router_bias()[e] += l < mean ? rate : (l > mean ? -rate : 0.0f);
    }
  }
}

double Trainer::evaluate() {
  if (!valid_data_) return std::nan("");
  const ParallelConfig& par = config_.parallel;
  // train.eval_batches global batches of fixed windows, split over the data replicas like training.
  const int per_replica = config_.train.eval_batches * par.micro_batch_num;
  const int64_t windows = int64_t(config_.train.eval_batches) * config_.train.global_batch_size;
  const int S = config_.model.seq_length, b = micro_batch_size_;
  const MicroBatchFill fill = [&](int index, int* tokens, int* targets) {
    for (int i = 0; i < b; ++i)
      sample_eval_window(*valid_data_, int64_t(index) * b + i, windows, S, tokens + size_t(i) * S,
                         targets + size_t(i) * S);
  };
  rebalancer_->begin_step(params_, *backend_);
  executor_->set_numerics(block_numerics());  // the training precision, without fault injection
  const double ce_sum = executor_->evaluate(fill, pc_.dense_replica() * per_replica, per_replica);
  // Each CP rank's sum is of its tokens' means: over all data replicas they average to the whole's.
  double total = pc_.coord.tp == 0 ? ce_sum : 0.0;
  pc_.world->all_reduce(&total, 1, DType::kF64, ReduceOp::kSum);
  return total / (double(par.data_replicas()) * per_replica);
}

void Trainer::run() {
  const int total = config_.train.steps;
  const int64_t stop = options_.exit_after > 0 ? std::min<int64_t>(total, step_ + options_.exit_after) : total;
  const auto t0 = Clock::now();
  const int64_t first = step_;
  while (step_ < stop) {
    const bool traced = tracer_ && tracer_->traces(step_ + 1);
    if (traced) tracer_->begin_step(step_ + 1, *model_, sync_->hooks());
    StepResult r = train_step();
    const int interval = config_.checkpoint.interval;
    const bool save_scheduled = (interval > 0 && step_ % interval == 0) || step_ == total || step_ == stop;
    // Commits an asynchronous save whose writes have all ended, or waits for it when this step saves
    // again, so that its figures reach this step's record.
    poll_checkpoint(save_scheduled && !config_.checkpoint.dir.empty());
    if (!checkpoint_record_.is_null()) r.record["checkpoints"] = std::exchange(checkpoint_record_, nullptr);
    const int eval_every = config_.train.eval_interval;
    if (eval_every > 0 && (step_ % eval_every == 0 || step_ == total) && valid_data_) {
      const auto eval_start = Clock::now();
      r.record["val_loss"] = evaluate();
      if (traced) tracer_->span("evaluation", "evaluation", eval_start, Clock::now());
    }
    std::string metrics_error;  // rank 0: a failed metrics write stops the run, with a checkpoint
    if (pc_.rank == 0) {
      try {
        metrics_.write(r.record);
      } catch (const Error& e) {
        metrics_error = e.what();
      }
      for (const std::unique_ptr<RunSink>& sink : sinks_) sink->on_step(r.record);
      progress_.add(r);
      if (!options_.quiet && (step_ % config_.train.log_interval == 0 || step_ == stop))
        progress_.print(r, step_, stop, first, seconds_since(t0), guard_.skipped_steps(), loss_scaler_.dynamic());
    }
    // Once per step every rank learns whether any rank was asked to stop (a signal may reach one
    // rank only) or could not write the metrics file, so that all stop after the same step.
    int stop_flags[2] = {options_.stop_signal ? options_.stop_signal->load() : 0, metrics_error.empty() ? 0 : 1};
    pc_.world->all_reduce(stop_flags, 2, DType::kI32, ReduceOp::kMax);
    const bool stopping = stop_flags[0] != 0 || stop_flags[1] != 0;
    // The last step of the run (train.steps, --exit-after, a signal, a metrics failure) always
    // checkpoints, whatever checkpoint.interval says.
    const bool checkpoint_due = save_scheduled || stopping;
    std::string checkpoint_error;
    if (!config_.checkpoint.dir.empty() && checkpoint_due) {
      const auto save_start = Clock::now();
      // Inside a streak of non-finite steps the newest checkpoint stays the last good one.
      if (guard_.streak() == 0) {
        try {
          save_checkpoint();
        } catch (const Error& e) {
          if (!stop_flags[1]) throw;
          checkpoint_error = e.what();
        }
      } else if (pc_.rank == 0) {
        log_warn("step {}: checkpoint not written, {} consecutive non-finite step(s)", step_, guard_.streak());
      }
      if (traced) tracer_->span("checkpoint", "checkpoint", save_start, Clock::now());
    }
    if (traced) tracer_->end_step(*model_, sync_->hooks());
    if (stop_flags[1]) {
      try {
        finish_checkpoint();
      } catch (const Error& e) {
        checkpoint_error = e.what();
      }
      const std::string what = metrics_error.empty() ? "the metrics file could not be written on rank 0" : metrics_error;
      std::string saved = "checkpoint written: " + last_checkpoint_ + " (continue with --resume)";
      if (!checkpoint_error.empty()) saved = "the checkpoint could not be written either: " + checkpoint_error;
      else if (config_.checkpoint.dir.empty()) saved = "no checkpoint written (checkpoint.dir is empty)";
      else if (guard_.streak() != 0) saved = "newest checkpoint (the last good state): " + last_checkpoint_;
      fail("{}; training stopped after step {}; {}", what, step_, saved);
    }
    if (stop_flags[0]) {
      stopped_by_signal_ = stop_flags[0];
      break;
    }
  }
  finish_checkpoint();  // a stop, --exit-after and the end of the run wait for the save in flight
  if (tracer_) tracer_->finish();
}

BlockNumerics Trainer::step_numerics(int64_t step) {
  BlockNumerics numerics = block_numerics();
  if (injection_ && options_.fault_injector->watches(step)) {
    injection_->set_step(step);
    numerics.inspector = injection_.get();
  }
  return numerics;
}

void Trainer::stop_nonfinite(int64_t step, const MicroBatchFill& fill, float micro_batch_weight) {
  // Re-run the step (same data; same parameters, since the bad steps before it were skipped) with a
  // tracer watching every block GEMM tensor, then agree over the world on the earliest finding.
  TensorInspector* injection = injection_ && options_.fault_injector->watches(step) ? injection_.get() : nullptr;
  NonfiniteTracer tracer(params_, config_.model.num_layers, injection, backend_.get());
  tracer.check_values();
  sync_->begin_step(step - guard_.skipped_steps());  // zeroes the gradients, as at the start of the step
  executor_->set_numerics(block_numerics(&tracer));
  executor_->train(fill, micro_batch_weight, nullptr, sync_->grad_sync());
  sync_->grad_sync().finish();
  executor_->set_numerics(block_numerics());
  tracer.check_gradients();
  const NonfiniteDiagnosis diagnosis = agree_on_first_nonfinite(tracer.first(), *pc_.world);

  const std::string precision(config_names::name_of(config_names::kPrecisionNames, config_.train.precision));
  const std::string scale = loss_scaler_.dynamic() ? fmt::format(", loss scale {:g}", loss_scaler_.scale()) : "";
  const std::string first =
      diagnosis.found
          ? fmt::format("first non-finite tensor: {} on rank {}", diagnosis.what, diagnosis.rank)
          : "a re-run of the step found every checked tensor finite (master weights, block GEMM operands and "
            "results, gradients), so the value arose in a kernel between them";
  const std::string kept = config_.checkpoint.dir.empty()
                               ? "checkpointing is off"
                               : fmt::format("no checkpoint was written during these steps; the newest one in {} "
                                             "is the last good state",
                                             config_.checkpoint.dir);
  fail("step {}: the loss or the gradients were non-finite for {} consecutive steps (train.max_nonfinite_steps {}, "
       "train.precision {}{}); {}; {}",
       step, guard_.streak(), guard_.max_nonfinite_steps(), precision, scale, first, kept);
}

nlohmann::json Trainer::numerics_state() const {
  return {{"loss_scaler", loss_scaler_.to_json()}, {"skipped_steps", guard_.skipped_steps()}};
}

void Trainer::restore_numerics_state(const nlohmann::json& state, const std::string& origin) {
  if (!state.is_object() || !state.contains("loss_scaler") || !state.contains("skipped_steps") ||
      !state["skipped_steps"].is_number_integer() || state["skipped_steps"].get<int64_t>() < 0)
    fail("checkpoint {}: state.json numerics is malformed: {}, expected {{\"loss_scaler\": {{...}}, "
         "\"skipped_steps\": N >= 0}}",
         origin, state.dump());
  loss_scaler_.from_json(state["loss_scaler"], "checkpoint " + origin);
  guard_.restore(state["skipped_steps"].get<int64_t>());
}

}  // namespace moe4d
