// train/zero_param_gatherer.cc — value shards, per-layer materialisation and post-step all-gathers
// (see the header).
#include "train/zero_param_gatherer.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "model/layer_hooks.h"
#include "train/zero_memory.h"

namespace moe4d {

ZeroParamGatherer::ZeroParamGatherer(ParamStore& params, ParallelContext& pc, const ZeroLayout& layout,
                                     int zero_stage, bool head_uses_embedding, int prefetch_buckets)
    : params_(params), pc_(pc), layout_(layout), stage_(zero_stage), prefetch_(prefetch_buckets),
      units_(layout.buckets().size()) {
  MOE4D_CHECK(zero_stage >= 1 && zero_stage <= 3);
  MOE4D_CHECK_GE(prefetch_buckets, 0);
  for (int g = 0; g < kNumParamGroups; ++g) MOE4D_CHECK_EQ(layout.ranks(ParamGroup(g)), comm_of(ParamGroup(g))->size());
  if (stage_ != 3) return;
  for (int g = 0; g < kNumParamGroups; ++g) shards_[g] = Buffer(layout.shard_size(ParamGroup(g)) * sizeof(float));
  head_units_ = layout.buckets_of_layer(layout.num_layers());
  if (head_uses_embedding)
    for (int b : layout.buckets_of_layer(-1))
      if (std::find(head_units_.begin(), head_units_.end(), b) == head_units_.end()) head_units_.push_back(b);
}

ZeroParamGatherer::~ZeroParamGatherer() {
  for (Unit& u : units_)
    if (u.work) u.work->wait();  // MPI must not write into the buffers after they are gone
}

Communicator* ZeroParamGatherer::comm_of(ParamGroup g) const {
  return g == ParamGroup::kDense ? pc_.dp_ep.get() : pc_.dp.get();
}

std::unique_ptr<Work> ZeroParamGatherer::gather_bucket(const ZeroBucket& b, const float* send, float* bucket_dst) {
  Communicator* comm = comm_of(b.group);
  const int n = comm->size(), me = comm->rank();
  std::vector<size_t> send_counts(n), send_displs(n, 0), recv_counts(n), recv_displs(n);
  const size_t mine = b.slice_end(me) - b.slice_begin(me);
  for (int r = 0; r < n; ++r) {
    send_counts[r] = mine;
    recv_counts[r] = b.slice_end(r) - b.slice_begin(r);
    recv_displs[r] = b.slice_begin(r) - b.begin;
    if (r != me) payload_bytes_ += int64_t(mine * sizeof(float));
  }
  return comm->all_to_all_v_async(send, send_counts.data(), send_displs.data(), bucket_dst, recv_counts.data(),
                                  recv_displs.data(), DType::kF32);
}

void ZeroParamGatherer::shard_from_flat() {
  if (stage_ != 3) return;
  for (int g = 0; g < kNumParamGroups; ++g) {
    const ParamGroup group = ParamGroup(g);
    cut(group, params_.flat_values(group), shards_[g].f32());
    release_discarded(params_.flat_values(group), params_.flat_size(group));
  }
  for (Unit& u : units_) {
    MOE4D_CHECK(u.users == 0 && !u.work);
    u.state = State::kReleased;
  }
}

void ZeroParamGatherer::gather_after_step() {
  if (stage_ == 3) return;
  // The slices go out of a copy: MPI (libnbc) takes a send buffer equal to the receive buffer for
  // MPI_IN_PLACE, which is what sending straight from the flat buffer would be for rank 0.
  for (ParamGroup g : {ParamGroup::kDense, ParamGroup::kExpert}) {
    if (layout_.ranks(g) == 1 || layout_.shard_size(g) == 0) continue;
    Buffer mine(layout_.shard_size(g) * sizeof(float));
    cut(g, params_.flat_values(g), mine.f32());
    assemble(g, mine.f32(), params_.flat_values(g));
  }
}

const std::vector<int>& ZeroParamGatherer::units_of(int layer) const {
  return layer == layout_.num_layers() ? head_units_ : layout_.buckets_of_layer(layer);
}

void ZeroParamGatherer::start(int index) {
  Unit& u = units_[index];
  if (u.state != State::kReleased) return;
  const ZeroBucket& b = layout_.buckets()[index];
  const float* send = shards_[int(b.group)].f32() + b.shard_offset;
  u.work = gather_bucket(b, send, params_.flat_values(b.group) + b.begin);
  u.state = State::kInFlight;
}

void ZeroParamGatherer::note_peak() {
  const size_t shards = shards_[0].bytes() + shards_[1].bytes();
  size_t resident = 0, gathered = 0;
  for (int g = 0; g < kNumParamGroups; ++g)
    resident += resident_bytes(params_.flat_values(ParamGroup(g)), params_.flat_size(ParamGroup(g)) * sizeof(float));
  for (size_t i = 0; i < units_.size(); ++i)
    if (units_[i].state != State::kReleased) gathered += layout_.buckets()[i].numel() * sizeof(float);
  peak_ = std::max(peak_, shards + std::max(resident, gathered));
}

void ZeroParamGatherer::acquire(int layer, int next) {
  if (stage_ != 3) return;
  const std::vector<int>& units = units_of(layer);
  for (int index : units) start(index);
  for (int index : units) {
    Unit& u = units_[index];
    if (u.state == State::kInFlight) {
      u.work->wait();
      u.work.reset();
      u.state = State::kResident;
    }
    ++u.users;
  }
  next_ = next;
  if (next != LayerHooks::kNoLayer) {
    // Buckets gathered ahead and not yet used count against the prefetch depth.
    int ahead = 0;
    for (const Unit& u : units_) ahead += u.state != State::kReleased && u.users == 0 ? 1 : 0;
    for (int index : units_of(next)) {
      if (ahead >= prefetch_) break;
      if (units_[index].state != State::kReleased) continue;
      start(index);
      ++ahead;
    }
  }
  note_peak();
}

void ZeroParamGatherer::release(int layer) {
  if (stage_ != 3) return;
  const std::vector<int>* next = next_ != LayerHooks::kNoLayer ? &units_of(next_) : nullptr;
  for (int index : units_of(layer)) {
    Unit& u = units_[index];
    MOE4D_CHECK_MSG(u.users > 0 && u.state == State::kResident, "layer {} released without being acquired", layer);
    if (--u.users > 0) continue;
    // A bucket the next layer holds too stays: releasing it would only gather it again.
    if (next && std::find(next->begin(), next->end(), index) != next->end()) continue;
    const ZeroBucket& b = layout_.buckets()[index];
    release_discarded(params_.flat_values(b.group) + b.begin, b.numel());
    u.state = State::kReleased;
  }
}

void ZeroParamGatherer::materialize_all() {
  if (stage_ != 3) return;
  for (size_t i = 0; i < units_.size(); ++i) start(static_cast<int>(i));
  for (Unit& u : units_) {
    if (u.state == State::kInFlight) {
      u.work->wait();
      u.work.reset();
      u.state = State::kResident;
    }
    ++u.users;
  }
  note_peak();
}

void ZeroParamGatherer::release_all() {
  if (stage_ != 3) return;
  for (size_t i = 0; i < units_.size(); ++i) {
    Unit& u = units_[i];
    MOE4D_CHECK(u.users > 0);
    if (--u.users > 0) continue;
    const ZeroBucket& b = layout_.buckets()[i];
    release_discarded(params_.flat_values(b.group) + b.begin, b.numel());
    u.state = State::kReleased;
  }
}

void ZeroParamGatherer::assemble(ParamGroup g, const float* shard, float* full) {
  std::vector<std::unique_ptr<Work>> works;
  for (const ZeroBucket& b : layout_.buckets()) {
    if (b.group != g) continue;
    if (layout_.ranks(g) == 1) {
      std::memcpy(full + b.begin, shard + b.shard_offset, b.numel() * sizeof(float));
      continue;
    }
    works.push_back(gather_bucket(b, shard + b.shard_offset, full + b.begin));
  }
  for (auto& w : works) w->wait();
}

void ZeroParamGatherer::cut(ParamGroup g, const float* full, float* shard) const {
  const int me = layout_.rank(g);
  for (const ZeroBucket& b : layout_.buckets()) {
    if (b.group != g) continue;
    const size_t lo = b.slice_begin(me), hi = b.slice_end(me);
    std::memcpy(shard + b.shard_offset, full + lo, (hi - lo) * sizeof(float));
    std::memset(shard + b.shard_offset + (hi - lo), 0, (b.slice - (hi - lo)) * sizeof(float));
  }
}

size_t ZeroParamGatherer::held_bytes() const {
  if (stage_ == 3) return shards_[0].bytes() + shards_[1].bytes();
  return params_.total_numel() * sizeof(float);
}

}  // namespace moe4d
