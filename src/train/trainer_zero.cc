// train/trainer_zero.cc — the Trainer's ZeRO-facing members: building the sharded training state,
// the exact global gradient norm, the optimizer step with its parameter all-gather, and this rank's
// memory figures (train/memory_report.h; docs/zero.md).
#include <sys/resource.h>

#include <algorithm>
#include <cmath>

#include "config/config_names.h"
#include "train/trainer.h"

namespace moe4d {
namespace {

const char* compression_name(GradCompression c) {
  return config_names::name_of(config_names::kGradCompressionNames, c).data();  // a string literal
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

double Trainer::reduce_grad_norm() {
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

RankMemoryUse Trainer::rank_memory() const {
  RankMemoryUse m;
  m.params = double(zero_values_ ? zero_values_->held_bytes() : params_.total_numel() * sizeof(float));
  m.params_peak = double(zero_values_ ? zero_values_->peak_bytes() : m.params);
  m.grads = double(grad_sync_->held_bytes());
  m.grads_peak = m.grads + double(grad_sync_->peak_transient_bytes());
  m.optimizer = double(optimizer_->state_bytes());
  m.activations = double(executor_->peak_activation_bytes());
  m.replicas = rebalancer_->buffer_bytes();
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  m.rss_peak = double(usage.ru_maxrss) * 1024.0;
  const ZeroStateBytes formula = zero_state_bytes(config_.parallel.zero_stage, *zero_layout_);
  m.formula_params = double(formula.params);
  m.formula_grads = double(formula.grads);
  m.formula_optimizer = double(formula.optimizer);
  m.local_params = double(params_.total_numel());
  return m;
}

nlohmann::json Trainer::take_zero_record() {
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
