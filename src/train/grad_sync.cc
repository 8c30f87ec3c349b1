// train/grad_sync.cc — bucketed all-reduce (ZeRO 0/1) and per-micro-batch reduce-scatter into
// gradient shards (ZeRO 2/3), optionally in 16 bit (see the header).
#include "train/grad_sync.h"

#include <algorithm>

#include "backend/cpu_backend.h"
#include "comm/half_float.h"
#include "core/check.h"
#include "train/tensor_gather.h"
#include "train/zero_memory.h"

namespace moe4d {
namespace {

void to_wire(Backend& backend, const float* src, size_t count, size_t padded, DType wire, void* dst) {
  if (wire == DType::kF32) {
    backend.copy(dst, src, count * sizeof(float));
    backend.zero(static_cast<float*>(dst) + count, (padded - count) * sizeof(float));
    return;
  }
  auto* out = static_cast<uint16_t*>(dst);
  if (wire == DType::kBF16)
    for (size_t i = 0; i < count; ++i) out[i] = float_to_bf16(src[i]);
  else
    for (size_t i = 0; i < count; ++i) out[i] = float_to_f16(src[i]);
  backend.zero(out + count, (padded - count) * sizeof(uint16_t));
}

// dst[i] = (accumulate ? dst[i] : 0) + wire value i.
void from_wire(Backend& backend, const void* src, size_t count, DType wire, float* dst, bool accumulate) {
  if (wire == DType::kF32) {
    if (accumulate)
      backend.axpy(dst, static_cast<const float*>(src), 1.0f, int64_t(count));
    else
      backend.copy(dst, src, count * sizeof(float));
    return;
  }
  const auto* in = static_cast<const uint16_t*>(src);
  for (size_t i = 0; i < count; ++i) {
    const float v = wire == DType::kBF16 ? bf16_to_float(in[i]) : f16_to_float(in[i]);
    dst[i] = accumulate ? dst[i] + v : v;
  }
}

}  // namespace

GradSync::GradSync(ParamStore& params, ParallelContext& pc, const ZeroLayout& layout, GradSyncOptions options)
    : params_(params),
      pc_(pc),
      layout_(layout),
      options_(options),
      backend_(options.backend ? *options.backend : thread_cpu_backend()) {
  MOE4D_CHECK(options.zero_stage >= 0 && options.zero_stage <= 3);
  // The first stage always holds embed.weight, the last one only when the embedding is tied (its
  // copy): only then are there two gradients to sum. Only the last stage can tell, so it says.
  if (pc.embed) {
    int tied = 0;
    for (int id = 0; id < params.size(); ++id) tied |= params.info(id).is_tied_copy ? 1 : 0;
    pc.embed->all_reduce(&tied, 1, DType::kI32, ReduceOp::kMax);
    tied_embedding_ = tied != 0;
  }
  for (const ZeroBucket& b : layout.buckets()) {
    MOE4D_CHECK_EQ(layout.ranks(b.group), comm_of(b.group)->size());
    MOE4D_CHECK(buckets_.empty() || buckets_.back().layout->group < b.group ||
                (buckets_.back().layout->group == b.group && buckets_.back().layout->end == b.begin));
    buckets_.push_back({&b, comm_of(b.group)});
    group_first_[int(b.group) + 1] = static_cast<int>(buckets_.size());
  }
  group_first_[2] = std::max(group_first_[2], group_first_[1]);
  reported_.assign(params.size(), 0);
  rounds_.assign(params.size(), 0);
  params_of_layer_.resize(layout.num_layers() + 2);
  for (int id = 0; id < params.size(); ++id) {
    const ParamInfo& info = params.info(id);
    params_of_layer_[info.layer + 1].push_back(id);
    if (info.numel() == 0) continue;
    const size_t lo = info.offset, hi = info.offset + size_t(info.numel());
    for (int k = bucket_at(info.group, lo); k < group_first_[int(info.group) + 1]; ++k) {
      const ZeroBucket& z = *buckets_[k].layout;
      if (z.begin >= hi) break;
      buckets_[k].param_elements += std::min(hi, z.end) - std::max(lo, z.begin);
    }
  }
  for (Bucket& b : buckets_) b.pending_elements = b.param_elements;
  if (sharded())
    for (int g = 0; g < kNumParamGroups; ++g) shards_[g] = Buffer(layout.shard_size(ParamGroup(g)) * sizeof(float));
}

GradSync::~GradSync() = default;

Communicator* GradSync::comm_of(ParamGroup g) const {
  return g == ParamGroup::kDense ? pc_.dp_ep.get() : pc_.dp.get();
}

HierarchicalAllReduce& GradSync::all_reduce_of(ParamGroup g) const {
  return g == ParamGroup::kDense ? *pc_.dp_ep_sync : *pc_.dp_sync;
}

void GradSync::poll() {
  for (InFlight& f : in_flight_) f.work->test();
}

DType GradSync::wire_type() const {
  switch (options_.compression) {
    case GradCompression::kNone: return DType::kF32;
    case GradCompression::kBF16: return DType::kBF16;
    case GradCompression::kFP16: return DType::kF16;
  }
  return DType::kF32;
}

void GradSync::zero_grads() {
  if (!sharded()) {
    params_.zero_grads(backend_);
    return;
  }
  for (int g = 0; g < kNumParamGroups; ++g) {
    release_zeroed(params_.flat_grads(ParamGroup(g)), params_.flat_size(ParamGroup(g)));
    if (shards_[g].bytes() > 0) backend_.zero(shards_[g].data(), shards_[g].bytes());
  }
}

void GradSync::begin() {
  for (Bucket& b : buckets_) {
    b.pending = static_cast<int>(b.layout->layers.size());
    b.launched = false;
    b.pending_elements = b.param_elements;
  }
  std::fill(reported_.begin(), reported_.end(), 0);  // host bookkeeping: elements reported per bucket
  std::fill(rounds_.begin(), rounds_.end(), 0);
}

int GradSync::bucket_at(ParamGroup g, size_t flat) const {
  const int first = group_first_[int(g)], last = group_first_[int(g) + 1];
  MOE4D_CHECK(first < last);
  // The last bucket of the group that begins at or before `flat`.
  auto it = std::upper_bound(buckets_.begin() + first, buckets_.begin() + last, flat,
                             [](size_t at, const Bucket& b) { return at < b.layout->begin; });
  MOE4D_CHECK(it != buckets_.begin() + first);
  return static_cast<int>(it - buckets_.begin()) - 1;
}

size_t GradSync::grad_cut_below(int param, size_t end) const {
  if (end == 0) return 0;
  const ParamInfo& info = params_.info(param);
  const size_t begin = buckets_[bucket_at(info.group, info.offset + end - 1)].layout->begin;
  return begin > info.offset ? begin - info.offset : 0;
}

void GradSync::on_grad_ready(int param, size_t begin, size_t end) {
  if (!sharded() || begin == end) return;
  const ParamInfo& info = params_.info(param);
  const size_t numel = size_t(info.numel());
  MOE4D_CHECK_MSG(begin < end && end <= numel && reported_[param] + (end - begin) <= numel,
                  "{}: gradient elements [{}, {}) reported twice in one round", info.name, begin, end);
  reported_[param] += end - begin;
  if (reported_[param] == numel) {  // a full report; the tied table used as head gets a second round
    reported_[param] = 0;
    ++rounds_[param];
  }
  const size_t lo = info.offset + begin, hi = info.offset + end;
  for (int k = bucket_at(info.group, lo); k < group_first_[int(info.group) + 1]; ++k) {
    Bucket& b = buckets_[k];
    if (b.layout->begin >= hi) break;
    const size_t overlap = std::min(hi, b.layout->end) - std::max(lo, b.layout->begin);
    MOE4D_CHECK_LE(overlap, b.pending_elements);
    b.pending_elements -= overlap;
    if (b.pending_elements > 0) continue;
    launch(k);
    b.pending_elements = b.param_elements;  // the next micro-batch's (or round's) turn
    if (!options_.overlap)
      while (!in_flight_.empty()) complete_oldest();
  }
}

void GradSync::on_layer_ready(int layer) {
  if (sharded() || !reduce_) return;
  poll();
  for (int index : layout_.buckets_of_layer(layer)) {
    Bucket& b = buckets_[index];
    if (--b.pending == 0 && options_.overlap) launch(index);
  }
}

void GradSync::on_layer_backward(int layer) {
  if (!sharded()) return;
  poll();
  for (int id : params_of_layer_[layer + 1]) {
    MOE4D_CHECK_MSG(reported_[id] == 0 && rounds_[id] >= 1,
                    "{}: the backward of layer {} did not report its whole gradient ({} of {} elements, {} rounds)",
                    params_.info(id).name, layer, reported_[id], params_.info(id).numel(), rounds_[id]);
    rounds_[id] = 0;
  }
}

int GradSync::acquire_staging(size_t bytes) {
  if (free_staging_.empty()) {
    // Every staging buffer fits the largest bucket, so kMaxInFlight of them serve every bucket.
    size_t largest = 0;
    for (const ZeroBucket& b : layout_.buckets())
      largest = std::max(largest, size_t(layout_.ranks(b.group)) * b.slice * dtype_size(wire_type()));
    MOE4D_CHECK_LE(bytes, largest);
    staging_.emplace_back(largest);
    free_staging_.push_back(static_cast<int>(staging_.size()) - 1);
  }
  const int index = free_staging_.back();
  free_staging_.pop_back();
  return index;
}

void GradSync::note_transient() {
  size_t bytes = 0;
  for (const Buffer& s : staging_) bytes += s.bytes();
  for (int g = 0; g < kNumParamGroups; ++g)
    bytes += resident_bytes(params_.flat_grads(ParamGroup(g)), params_.flat_size(ParamGroup(g)) * sizeof(float));
  peak_transient_ = std::max(peak_transient_, bytes);
}

void GradSync::launch(int index) {
  Bucket& b = buckets_[index];
  const ZeroBucket& z = *b.layout;
  const int g = static_cast<int>(z.group);
  b.launched = true;
  float* flat = params_.flat_grads(z.group) + z.begin;
  const int ranks = b.comm->size();
  const DType wire = wire_type();
  if (!sharded()) {
    if (ranks == 1) return;
    if (wire == DType::kF32) {
      in_flight_.push_back({index, -1, all_reduce_of(z.group).all_reduce_async(flat, z.numel(), DType::kF32)});
    } else {
      auto staged = [&] {
        return std::count_if(in_flight_.begin(), in_flight_.end(), [](const InFlight& f) { return f.staging >= 0; });
      };
      while (staged() >= kMaxInFlight) complete_oldest();
      const int s = acquire_staging(z.numel() * dtype_size(wire));
      to_wire(backend_, flat, z.numel(), z.numel(), wire, staging_[s].data());
      size_t staged_bytes = 0;
      for (const Buffer& buffer : staging_) staged_bytes += buffer.bytes();
      peak_transient_ = std::max(peak_transient_, staged_bytes);
      in_flight_.push_back({index, s, all_reduce_of(z.group).all_reduce_async(staging_[s].data(), z.numel(), wire)});
    }
    payload_bytes_ += int64_t(z.numel() * dtype_size(wire));
    return;
  }
  float* shard = shards_[g].f32() + z.shard_offset;
  if (ranks == 1) {  // the slice is the whole bucket: accumulate locally
    backend_.axpy(shard, flat, 1.0f, int64_t(z.numel()));
    note_transient();
    release_zeroed(flat, z.numel());
    return;
  }
  while (in_flight_.size() >= size_t(kMaxInFlight)) complete_oldest();
  const size_t padded = size_t(ranks) * z.slice;
  const int s = acquire_staging(padded * dtype_size(wire));
  to_wire(backend_, flat, z.numel(), padded, wire, staging_[s].data());
  note_transient();
  release_zeroed(flat, z.numel());
  // In place: the input is the whole staging buffer, this rank's reduced slice lands at its start.
  in_flight_.push_back(
      {index, s, b.comm->reduce_scatter_async(staging_[s].data(), staging_[s].data(), z.slice, wire, ReduceOp::kSum)});
  payload_bytes_ += int64_t(padded * dtype_size(wire));
}

void GradSync::complete_oldest() {
  InFlight f = std::move(in_flight_.front());
  in_flight_.pop_front();
  f.work->wait();
  const ZeroBucket& z = *buckets_[f.bucket].layout;
  const DType wire = wire_type();
  if (sharded()) {
    from_wire(backend_, staging_[f.staging].data(), z.slice, wire, shards_[int(z.group)].f32() + z.shard_offset, true);
  } else if (f.staging >= 0) {
    from_wire(backend_, staging_[f.staging].data(), z.numel(), wire, params_.flat_grads(z.group) + z.begin, false);
  }
  if (f.staging >= 0) free_staging_.push_back(f.staging);
}

void GradSync::finish() {
  if (!sharded() && reduce_) {
    for (size_t i = 0; i < buckets_.size(); ++i)
      if (!buckets_[i].launched) launch(static_cast<int>(i));
  }
  while (!in_flight_.empty()) complete_oldest();
  if (sharded()) {
    for (const Bucket& b : buckets_)
      MOE4D_CHECK_MSG(b.pending_elements == b.param_elements, "bucket [{}, {}) was not reported complete",
                      b.layout->begin, b.layout->end);
  }
  if (!tied_embedding_) return;  // tied embedding split over the first and last pipeline stage
  if (sharded()) {
    for (const Bucket& b : buckets_)
      if (b.layout->embedding_table)
        pc_.embed->all_reduce(shards_[int(b.layout->group)].f32() + b.layout->shard_offset, b.layout->slice);
    return;
  }
  for (int id = 0; id < params_.size(); ++id)
    if (params_.info(id).name == "embed.weight") pc_.embed->all_reduce(params_.grad(id), params_.info(id).numel());
}

double GradSync::grad_sum_squares(bool local_estimates) {
  backend_.synchronize();  // the host reads the gradients' norm
  auto countable = [&](const ParamInfo& info) {
    return !info.is_tied_copy && !(info.tp_replicated && pc_.coord.tp != 0);
  };
  double sum = 0;
  if (local_estimates) {
    MOE4D_CHECK(!sharded());
    for (int id = 0; id < params_.size(); ++id) {
      const ParamInfo& info = params_.info(id);
      if (countable(info)) sum += layout_.ranks(info.group) * backend_.sum_squares(params_.grad(id), info.numel());
    }
    return sum;
  }
  if (options_.zero_stage == 0) {
    for (int id = 0; id < params_.size(); ++id)
      if (is_canonical_copy(params_.info(id), pc_.coord))
        sum += backend_.sum_squares(params_.grad(id), params_.info(id).numel());
    return sum;
  }
  // Slices partition each group's buffer over its data-parallel ranks: every element once.
  for (const ShardPiece& p : layout_.pieces()) {
    if (!countable(params_.info(p.param))) continue;
    const float* data = sharded() ? shards_[int(p.group)].f32() + p.shard_offset
                                  : params_.flat_grads(p.group) + p.flat_begin;
    sum += backend_.sum_squares(data, int64_t(p.count));
  }
  return sum;
}

size_t GradSync::held_bytes() const {
  if (!sharded()) return params_.total_numel() * sizeof(float);
  return shards_[0].bytes() + shards_[1].bytes();
}

}  // namespace moe4d
