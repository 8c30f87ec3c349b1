// train/zero_param_gatherer.cc — value shards, per-read materialisation with a recorded prefetch
// window, and post-step all-gathers (see the header).
#include "train/zero_param_gatherer.h"

#include <algorithm>

#include "backend/cpu_backend.h"
#include "core/check.h"
#include "model/layer_hooks.h"
#include "train/zero_memory.h"

namespace moe4d {

ZeroParamGatherer::ZeroParamGatherer(ParamStore& params, ParallelContext& pc, const ZeroLayout& layout,
                                     int zero_stage, int prefetch_buckets, Backend* backend)
    : params_(params),
      backend_(backend ? *backend : thread_cpu_backend()),
      pc_(pc),
      layout_(layout),
      stage_(zero_stage),
      prefetch_(prefetch_buckets),
      units_(layout.buckets().size()) {
  MOE4D_CHECK(zero_stage >= 1 && zero_stage <= 3);
  MOE4D_CHECK_GE(prefetch_buckets, 0);
  for (int g = 0; g < kNumParamGroups; ++g) MOE4D_CHECK_EQ(layout.ranks(ParamGroup(g)), comm_of(ParamGroup(g))->size());
  if (stage_ != 3) return;
  for (int g = 0; g < kNumParamGroups; ++g) shards_[g] = Buffer(layout.shard_size(ParamGroup(g)) * sizeof(float));
  for (size_t i = 0; i < layout.buckets().size(); ++i) by_group_[int(layout.buckets()[i].group)].push_back(int(i));
  for (std::vector<int>& list : by_group_)
    std::sort(list.begin(), list.end(),
              [&](int a, int b) { return layout.buckets()[a].begin < layout.buckets()[b].begin; });
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

std::vector<int> ZeroParamGatherer::cover(int param, size_t begin, size_t end) const {
  const ParamInfo& info = params_.info(param);
  MOE4D_CHECK(begin < end && end <= size_t(info.numel()));
  const std::vector<int>& list = by_group_[int(info.group)];
  const size_t lo = info.offset + begin, hi = info.offset + end;
  // The first bucket ending after lo, then every one starting before hi.
  auto it = std::partition_point(list.begin(), list.end(), [&](int b) { return layout_.buckets()[b].end <= lo; });
  std::vector<int> out;
  for (; it != list.end() && layout_.buckets()[*it].begin < hi; ++it) out.push_back(*it);
  MOE4D_CHECK_MSG(!out.empty(), "parameter {} [{}, {}) lies in no bucket", info.name, begin, end);
  return out;
}

const ZeroParamGatherer::Trace* ZeroParamGatherer::trace_of(ParamGroup g, int layer, bool backward) const {
  if (layer == LayerHooks::kNoLayer) return nullptr;
  const auto& traces = reads_[int(g)].traces;
  const auto it = traces.find({layer, backward});
  return it == traces.end() ? nullptr : &it->second;
}

std::vector<int> ZeroParamGatherer::window(ParamGroup g) const {
  std::vector<int> out;
  const GroupReads& r = reads_[int(g)];
  if (prefetch_ == 0 || r.expected == nullptr) return out;  // no record, or the pass left it
  const auto take = [&](const Trace& trace, size_t from) {
    for (size_t i = from; i < trace.size(); ++i)
      for (int b : trace[i]) {
        if (int(out.size()) == prefetch_) return;
        if (std::find(out.begin(), out.end(), b) == out.end()) out.push_back(b);
      }
  };
  take(*r.expected, r.position);
  // Inside a pass, the next layer's record follows this one's (the same direction).
  const Trace* next = layer_ != LayerHooks::kNoLayer ? trace_of(g, next_, backward_) : nullptr;
  if (next && next != r.expected) take(*next, 0);
  return out;
}

void ZeroParamGatherer::start(int index) {
  Unit& u = units_[index];
  if (u.state != State::kReleased) return;
  const ZeroBucket& b = layout_.buckets()[index];
  const float* send = shards_[int(b.group)].f32() + b.shard_offset;
  u.work = gather_bucket(b, send, params_.flat_values(b.group) + b.begin);
  u.state = State::kInFlight;
}

void ZeroParamGatherer::finish(int index) {
  Unit& u = units_[index];
  if (u.state != State::kInFlight) return;
  u.work->wait();
  u.work.reset();
  u.state = State::kResident;
}

void ZeroParamGatherer::discard(int index) {
  finish(index);  // MPI must be done writing into the pages before they go
  const ZeroBucket& b = layout_.buckets()[index];
  release_discarded(params_.flat_values(b.group) + b.begin, b.numel());
  units_[index].state = State::kReleased;
}

void ZeroParamGatherer::evict(ParamGroup g, const std::vector<int>& keep) {
  for (int index : by_group_[int(g)]) {
    const Unit& u = units_[index];
    if (u.state == State::kReleased || u.users > 0) continue;
    if (std::find(keep.begin(), keep.end(), index) == keep.end()) discard(index);
  }
}

void ZeroParamGatherer::settle(ParamGroup g) {
  const std::vector<int> keep = window(g);
  evict(g, keep);
  for (int index : keep) start(index);
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

void ZeroParamGatherer::begin_layer(int layer, int next, bool backward) {
  if (stage_ != 3) return;
  MOE4D_CHECK_MSG(layer_ == LayerHooks::kNoLayer, "layer {} begins inside layer {}", layer, layer_);
  layer_ = layer;
  next_ = next;
  backward_ = backward;
  for (int g = 0; g < kNumParamGroups; ++g) {
    GroupReads& r = reads_[g];
    r.recording.clear();
    r.expected = trace_of(ParamGroup(g), layer, backward);
    r.position = 0;
    settle(ParamGroup(g));
  }
  note_peak();
}

void ZeroParamGatherer::end_layer(int layer, bool backward) {
  if (stage_ != 3) return;
  MOE4D_CHECK_MSG(layer == layer_ && backward == backward_, "layer {} ends, but layer {} is running", layer, layer_);
  MOE4D_CHECK_MSG(open_reads_ == 0, "layer {} ends with {} parameter read(s) still open", layer, open_reads_);
  for (int g = 0; g < kNumParamGroups; ++g) {
    GroupReads& r = reads_[g];
    r.traces[{layer, backward}] = std::move(r.recording);
    r.recording.clear();
    // Between passes the window is the start of the hinted layer's record.
    r.expected = trace_of(ParamGroup(g), next_, backward);
    r.position = 0;
  }
  layer_ = LayerHooks::kNoLayer;
  for (int g = 0; g < kNumParamGroups; ++g) settle(ParamGroup(g));
}

void ZeroParamGatherer::need(int param, size_t begin, size_t end) {
  if (stage_ != 3) return;
  MOE4D_CHECK_MSG(layer_ != LayerHooks::kNoLayer, "parameter {} read outside a layer pass", params_.info(param).name);
  const ParamGroup g = params_.info(param).group;
  std::vector<int> units = cover(param, begin, end);
  GroupReads& r = reads_[int(g)];
  if (r.expected && r.position < r.expected->size() && (*r.expected)[r.position] == units)
    ++r.position;
  else
    r.expected = nullptr;  // the pass reads differently from its record: no window until it ends
  for (int index : units) ++units_[index].users;
  ++open_reads_;
  // The last read's buckets stayed resident until now: a bucket shared with this read, or one the
  // window wants back soon (w1, w3, w2 of consecutive experts), is not gathered again. The other
  // group keeps only its window.
  const std::vector<int> keep = window(g);
  evict(g, keep);
  const ParamGroup other = g == ParamGroup::kDense ? ParamGroup::kExpert : ParamGroup::kDense;
  evict(other, window(other));
  for (int index : units) start(index);  // what is read now goes out before the prefetch
  for (int index : keep) start(index);
  for (int index : units) finish(index);
  note_peak();
  r.recording.push_back(std::move(units));
}

void ZeroParamGatherer::done(int param, size_t begin, size_t end) {
  if (stage_ != 3) return;
  for (int index : cover(param, begin, end)) {
    MOE4D_CHECK_MSG(units_[index].users > 0, "parameter {} done without being needed", params_.info(param).name);
    --units_[index].users;
  }
  --open_reads_;  // the buckets stay until the next read or the pass's end decides (need, settle)
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
      backend_.copy(full + b.begin, shard + b.shard_offset, b.numel() * sizeof(float));
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
    backend_.copy(shard + b.shard_offset, full + lo, (hi - lo) * sizeof(float));
    backend_.zero(shard + b.shard_offset + (hi - lo), (b.slice - (hi - lo)) * sizeof(float));
  }
}

size_t ZeroParamGatherer::held_bytes() const {
  if (stage_ == 3) return shards_[0].bytes() + shards_[1].bytes();
  return params_.total_numel() * sizeof(float);
}

}  // namespace moe4d
