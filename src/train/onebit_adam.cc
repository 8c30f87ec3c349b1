// train/onebit_adam.cc — 1-bit Adam and the error-compensated 1-bit all-reduce (see the header).
#include "train/onebit_adam.h"

#include <cmath>
#include <vector>

#include "backend/cpu_backend.h"
#include "core/check.h"

namespace moe4d {

OneBitAllReduce::OneBitAllReduce(Communicator& comm, size_t count, Backend* backend)
    : comm_(comm), backend_(backend ? *backend : thread_cpu_backend()), count_(count) {
  const size_t ranks = size_t(comm.size());
  chunk_ = (count + 8 * ranks - 1) / (8 * ranks) * 8;
  worker_error_ = Buffer(ranks * chunk_ * sizeof(float));
  server_error_ = Buffer(chunk_ * sizeof(float));
  send_ = Buffer(ranks * block_bytes());
  recv_ = Buffer(ranks * block_bytes());
  gathered_ = Buffer(ranks * block_bytes());
}

void OneBitAllReduce::average(float* data) {
  const int ranks = comm_.size(), me = comm_.rank();
  const size_t block = block_bytes();
  auto real = [&](int r) {  // elements of chunk r inside the buffer
    const size_t lo = size_t(r) * chunk_;
    return lo >= count_ ? size_t(0) : std::min(chunk_, count_ - lo);
  };
  // Worker: compress every chunk of data + error, send chunk r to rank r.
  std::vector<float> x(chunk_);
  auto* send = static_cast<uint8_t*>(send_.data());
  float* werr = worker_error_.f32();
  for (int r = 0; r < ranks; ++r) {
    const size_t lo = size_t(r) * chunk_, n = real(r);
    for (size_t i = 0; i < n; ++i) x[i] = data[lo + i] + werr[lo + i];
    backend_.onebit_compress(x.data(), n, chunk_, werr + lo, send + r * block);
  }
  std::vector<size_t> counts(ranks, block), displs(ranks);
  for (int r = 0; r < ranks; ++r) displs[r] = size_t(r) * block;
  auto* recv = static_cast<uint8_t*>(recv_.data());
  comm_.all_to_all_v(send, counts.data(), displs.data(), recv, counts.data(), displs.data(), DType::kU8);
  payload_bytes_ += int64_t((ranks - 1) * block);

  // Server: average this rank's chunk over the workers, add the server error, compress again.
  const size_t n = real(me);
  backend_.fill(x.data(), 0.0f, int64_t(x.size()));
  for (int r = 0; r < ranks; ++r) backend_.onebit_decompress(recv + r * block, n, 1.0f / float(ranks), x.data(), true);
  float* serr = server_error_.f32();
  for (size_t i = 0; i < n; ++i) x[i] += serr[i];
  std::vector<uint8_t> mine(block);
  backend_.onebit_compress(x.data(), n, chunk_, serr, mine.data());

  // Everyone gets every server's compressed chunk.
  auto* gathered = static_cast<uint8_t*>(gathered_.data());
  comm_.all_gather(mine.data(), gathered, block, DType::kU8);
  payload_bytes_ += int64_t(block);
  for (int r = 0; r < ranks; ++r)
    backend_.onebit_decompress(gathered + r * block, real(r), 1.0f, data + size_t(r) * chunk_, false);
}

OneBitAdam::OneBitAdam(std::vector<OptimizerSegment> segments, const size_t state_size[kNumParamGroups],
                       const TrainConfig& config, ParamStore& params, ParallelContext& pc, const ZeroLayout& layout,
                       Backend* backend)
    : AdamW(std::move(segments), state_size, config, backend), params_(params), layout_(layout) {
  MOE4D_CHECK_GE(config.freeze_steps, 1);
  for (int g = 0; g < kNumParamGroups; ++g) {
    MOE4D_CHECK_EQ(state_size[g], params.flat_size(ParamGroup(g)));
    ranks_[g] = g == int(ParamGroup::kDense) ? pc.dp_ep->size() : pc.dp->size();
  }
  for (const ZeroBucket& b : layout.buckets())
    reduce_.push_back(
        std::make_unique<OneBitAllReduce>(b.group == ParamGroup::kDense ? *pc.dp_ep : *pc.dp, b.numel(), &backend_));
}

OneBitAdam::~OneBitAdam() = default;

void OneBitAdam::step(int64_t step, double lr, float grad_scale) {
  if (step <= config_.freeze_steps) {
    AdamW::step(step, lr, grad_scale);
    return;
  }
  const float b1 = static_cast<float>(config_.beta1);
  for (int g = 0; g < kNumParamGroups; ++g) {
    float* m = m_[g].f32();
    const float* grad = params_.flat_grads(ParamGroup(g));
    const float coef = (1.0f - b1) * float(ranks_[g]) * grad_scale;
    backend_.momentum_update(m, grad, b1, coef, state_size_[g]);
  }
  for (size_t k = 0; k < reduce_.size(); ++k) {
    const ZeroBucket& b = layout_.buckets()[k];
    reduce_[k]->average(m_[int(b.group)].f32() + b.begin);
  }
  const float inv_bc1 = static_cast<float>(1.0 / (1.0 - std::pow(config_.beta1, double(step))));
  const float inv_bc2 = static_cast<float>(1.0 / (1.0 - std::pow(config_.beta2, double(config_.freeze_steps))));
  const float eps = static_cast<float>(config_.eps), lr_f = static_cast<float>(lr);
  for (const OptimizerSegment& s : segments_) {
    const int g = static_cast<int>(s.group);
    const float* m = m_[g].f32() + s.state_offset;
    const float* v = v_[g].f32() + s.state_offset;
    const float decay = s.weight_decay ? lr_f * static_cast<float>(config_.weight_decay) : 0.0f;
    backend_.onebit_adam_update(s.value, m, v, s.count, lr_f, inv_bc1, inv_bc2, eps, decay);
  }
}

size_t OneBitAdam::state_bytes() const {
  size_t bytes = AdamW::state_bytes();
  for (const auto& r : reduce_) bytes += r->state_bytes();
  return bytes;
}

int64_t OneBitAdam::payload_bytes() const {
  int64_t bytes = 0;
  for (const auto& r : reduce_) bytes += r->payload_bytes();
  return bytes;
}

}  // namespace moe4d
