// train/parameter_sync.cc — building the sharded training state, the exact global gradient norm,
// the optimizer step with its parameter all-gather, this rank's memory figures
// (train/memory_report.h) and the accessors checkpoints use (docs/zero.md).
#include "train/parameter_sync.h"

#include <cmath>

#include "config/config_names.h"

namespace moe4d {
namespace {

const char* compression_name(GradCompression c) {
  return config_names::name_of(config_names::kGradCompressionNames, c).data();  // a string literal
}

}  // namespace

ParameterSync::ParameterSync(const Config& config, ParallelContext& pc, ParamStore& params, Backend& backend,
                             const std::vector<ChunkSpec>& chunks, Transformer& model)
    : config_(config), pc_(pc), params_(params), backend_(backend) {
  const ParallelConfig& par = config.parallel;
  const int stage = par.zero_stage;
  const int ranks[kNumParamGroups] = {pc.dp_ep->size(), pc.dp->size()};
  const int rank[kNumParamGroups] = {pc.dp_ep->rank(), pc.dp->rank()};
  layout_ = std::make_unique<ZeroLayout>(params, chunks, config.model.num_layers, zero_bucketing(par, ranks), ranks,
                                         rank);
  grad_sync_ = std::make_unique<GradSync>(params, pc, *layout_,
                                          GradSyncOptions{.backend = &backend,
                                                          .zero_stage = stage,
                                                          .compression = config.train.grad_compression,
                                                          .overlap = par.overlap_grad_reduce});
  // ZeRO-2/3: return the full gradient buffers' pages now (finalize touched them), before the shards
  // and the optimizer state are allocated, so that start-up does not hold both.
  grad_sync_->zero_grads();
  if (stage >= 1) {
    values_ = std::make_unique<ZeroParamGatherer>(params, pc, *layout_, stage, par.zero3_prefetch_buckets, &backend);
    values_->shard_from_flat();
  }
  optimizer_ = make_optimizer(backend, config.train, stage, params, pc, *layout_, *grad_sync_, values_.get());
  // Every stage: stages 2/3 gather and reduce through the hooks; 0/1 only take the bucket cuts from
  // them, so that the blocks' weight-gradient GEMMs are cut the same way in every stage.
  hooks_ = std::make_unique<ZeroLayerHooks>(stage == 3 ? values_.get() : nullptr, grad_sync_.get());
  model.set_layer_hooks(hooks_.get());
}

ParameterSync::~ParameterSync() = default;

void ParameterSync::begin_step(int64_t updates) {
  // 1-bit Adam after its warm-up reduces momenta, not gradients: this step's gradients stay local.
  // The optimizer counts the updates it made (skipped steps do not count), so ask it with that number.
  gradients_local_ = optimizer_->keeps_gradients_local(updates);
  grad_sync_->set_data_parallel(!gradients_local_);
  grad_sync_->zero_grads();
}

double ParameterSync::reduce_grad_norm() {
  // Each rank adds the squares of the gradient elements it counts (grad_sync.h); the world sum
  // counts every element of the model exactly once in every layout and ZeRO stage.
  double sum = grad_sync_->grad_sum_squares(gradients_local_);
  pc_.world->all_reduce(&sum, 1, DType::kF64, ReduceOp::kSum);
  return std::sqrt(sum);
}

void ParameterSync::optimizer_step(int64_t step, double lr, float grad_scale) {
  optimizer_->step(step, lr, grad_scale);
  // ZeRO 1/2: each rank updated its slices; everyone needs the full values for the next forward.
  if (values_) values_->gather_after_step();
}

std::map<std::string, FullTensor> ParameterSync::gather_parameters() {
  if (values_) values_->materialize_all();
  auto out = gather_full_tensors(pc_, params_, [this](int id) { return params_.value(id); });
  if (values_) values_->release_all();
  return out;
}

void ParameterSync::add_memory(RankMemoryUse& m) const {
  m.params = double(values_ ? values_->held_bytes() : params_.total_numel() * sizeof(float));
  m.params_peak = double(values_ ? values_->peak_bytes() : m.params);
  m.grads = double(grad_sync_->held_bytes());
  m.grads_peak = m.grads + double(grad_sync_->peak_transient_bytes());
  m.optimizer = double(optimizer_->state_bytes());
  const ZeroStateBytes formula = zero_state_bytes(config_.parallel.zero_stage, *layout_);
  m.formula_params = double(formula.params);
  m.formula_grads = double(formula.grads);
  m.formula_optimizer = double(formula.optimizer);
  m.local_params = double(params_.total_numel());
}

nlohmann::json ParameterSync::take_record() {
  // This rank's data-parallel payload of the step (rank 0's, in the metrics file): gradients handed
  // to reductions, parameters sent in all-gathers, the optimizer's own traffic (1-bit Adam).
  const int64_t now[3] = {grad_sync_->payload_bytes(), values_ ? values_->payload_bytes() : 0,
                          optimizer_->payload_bytes()};
  nlohmann::json rec = {{"stage", config_.parallel.zero_stage},
                        {"grad_compression", compression_name(config_.train.grad_compression)},
                        {"optimizer", optimizer_->name()},
                        {"gradients_local", gradients_local_},
                        {"grad_payload_bytes", now[0] - payload_seen_[0]},
                        {"param_gather_payload_bytes", now[1] - payload_seen_[1]},
                        {"optimizer_payload_bytes", now[2] - payload_seen_[2]}};
  for (int i = 0; i < 3; ++i) payload_seen_[i] = now[i];
  return rec;
}

void ParameterSync::zero_moments() {
  for (ParamGroup g : {ParamGroup::kDense, ParamGroup::kExpert})
    for (bool second : {false, true}) backend_.zero(moment(g, second), moment_size(g) * sizeof(float));
}

float* ParameterSync::moment(ParamGroup g, bool second) {
  return second ? optimizer_->exp_avg_sq(g) : optimizer_->exp_avg(g);
}

const float* ParameterSync::flat_moment(ParamGroup g, bool second, Buffer& scratch) {
  const float* state = moment(g, second);
  if (!values_) return state;
  scratch = Buffer(params_.flat_size(g) * sizeof(float));
  values_->assemble(g, state, scratch.f32());
  return scratch.f32();
}

void ParameterSync::reshard_values() {
  if (values_) values_->shard_from_flat();
}

PieceSources ParameterSync::piece_sources() {
  const int stage = config_.parallel.zero_stage;
  PieceSources sources;
  sources.values_sharded = stage == 3;
  sources.state_sharded = stage >= 1;
  for (ParamGroup g : {ParamGroup::kDense, ParamGroup::kExpert}) {
    sources.values[int(g)] = stage == 3 ? values_->shard_values(g) : params_.flat_values(g);
    sources.exp_avg[int(g)] = optimizer_->exp_avg(g);
    sources.exp_avg_sq[int(g)] = optimizer_->exp_avg_sq(g);
  }
  return sources;
}

}  // namespace moe4d
