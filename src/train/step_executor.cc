#include "train/step_executor.h"

namespace moe4d {

StepExecutor::StepExecutor(const Config& config, ParallelContext& pc, Transformer& model, ParamStore& params,
                           int micro_batch_size)
    : config_(config), pc_(pc), model_(model), params_(params), micro_batch_size_(micro_batch_size) {
  const size_t tokens = size_t(micro_batch_size) * config.model.seq_length;
  tokens_.resize(tokens);
  targets_.resize(tokens);
}

double StepExecutor::train(const MicroBatchFill& fill, float grad_scale, std::vector<MoeLayerStats>* stats,
                           GradSync& sync) {
  const int m = config_.parallel.micro_batch_num;
  const GradReadyFn on_ready = [&sync](int layer) { sync.on_layer_ready(layer); };
  double ce_sum = 0;
  for (int j = 0; j < m; ++j) {
    fill(pc_.data_replica() * m + j, tokens_.data(), targets_.data());
    BlockContext ctx{pc_,         params_,    config_.model, model_.rope(), state_.arena, scratch_, micro_batch_size_,
                     config_.model.seq_length, grad_scale, config_.parallel.recompute, stats};
    HeadOutput head;
    model_.forward(0, tokens_.data(), targets_.data(), nullptr, state_, ctx, &head);
    const bool last = j == m - 1;
    if (last) sync.begin();
    model_.backward(0, nullptr, nullptr, state_, ctx, last ? on_ready : GradReadyFn{});
    if (head.tokens > 0) ce_sum += head.loss_sum / head.tokens;
  }
  return ce_sum;
}

double StepExecutor::evaluate(const MicroBatchFill& fill, int first, int count) {
  double ce_sum = 0;
  for (int j = 0; j < count; ++j) {
    fill(first + j, tokens_.data(), targets_.data());
    BlockContext ctx{pc_, params_, config_.model, model_.rope(), state_.arena, scratch_, micro_batch_size_,
                     config_.model.seq_length, 1.0f, RecomputeGranularity::kNone, nullptr};
    HeadOutput head;
    model_.forward(0, tokens_.data(), targets_.data(), nullptr, state_, ctx, &head);
    state_.arena.reset();
    scratch_.reset();
    if (head.tokens > 0) ce_sum += head.loss_sum / head.tokens;
  }
  return ce_sum;
}

size_t StepExecutor::peak_activation_bytes() const { return state_.arena.peak_bytes() + scratch_.peak_bytes(); }

}  // namespace moe4d
