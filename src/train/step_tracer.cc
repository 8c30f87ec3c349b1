#include "train/step_tracer.h"

#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

#include "comm/clock_sync.h"

namespace moe4d {
namespace {

constexpr int kComputeTid = 1;
constexpr int kTagTraceLength = 0x7c20, kTagTraceData = 0x7c21;

int64_t steady_ns(StepTracer::Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

std::string host_name() {
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == 0) return "localhost";
  return name;
}

// A communicator's tracks: tid group_tid(index) + lane.
int group_tid(int index) { return 100 + 100 * index; }

}  // namespace

// Wraps the model's layer hooks: a span per layer forward / backward, around the inner hooks (ZeRO's
// parameter gathering and gradient reduction then show inside the layer they serve).
class StepTracer::LayerRecorder final : public LayerHooks {
 public:
  LayerRecorder(StepTracer& tracer, LayerHooks* inner) : tracer_(tracer), inner_(inner) {}
  void before_layer(int layer, int next, bool backward) override {
    open_layer_ = layer;
    open_ns_ = steady_ns(Clock::now());
    if (inner_) inner_->before_layer(layer, next, backward);
  }
  void after_layer(int layer, bool backward) override {
    if (inner_) inner_->after_layer(layer, backward);
    if (layer != open_layer_) return;
    const int n = tracer_.num_layers_;
    const std::string name = layer < 0 ? "embedding" : layer >= n ? "head" : fmt::format("layer {}", layer);
    tracer_.spans_.push_back(
        {fmt::format("{} {}", name, backward ? "bwd" : "fwd"), backward ? "backward" : "forward", open_ns_,
         steady_ns(Clock::now()), nullptr});
    open_layer_ = kNoLayer;
  }
  void grad_ready(int param, size_t begin, size_t end) override {
    if (inner_) inner_->grad_ready(param, begin, end);
  }
  size_t grad_cut_below(int param, size_t end) const override {
    return inner_ ? inner_->grad_cut_below(param, end) : 0;
  }
  void values_needed(int param, size_t begin, size_t end) override {
    if (inner_) inner_->values_needed(param, begin, end);
  }
  void values_done(int param, size_t begin, size_t end) override {
    if (inner_) inner_->values_done(param, begin, end);
  }

 private:
  StepTracer& tracer_;
  LayerHooks* inner_;
  int open_layer_ = kNoLayer;
  int64_t open_ns_ = 0;
};

StepTracer::StepTracer(std::vector<int> steps, ParallelContext& pc, const std::string& path, int num_layers)
    : steps_(std::move(steps)), pc_(pc), path_(path), num_layers_(num_layers) {
  // Groups as the metrics' time.comm counts them (train/trainer.cc snapshot()).
  auto add = [&](Communicator* comm, const char* kind) {
    if (comm) groups_.push_back({comm, kind, nullptr});
  };
  add(pc.tp.get(), "tp");
  add(pc.ep.get(), "ep");
  add(pc.dp.get(), "dp");
  add(pc.dp_ep.get(), "dp");
  for (HierarchicalAllReduce* sync : {pc.dp_sync.get(), pc.dp_ep_sync.get()})
    if (sync)
      for (Communicator* stage : sync->stage_communicators()) add(stage, "dp");
  add(pc.pp.get(), "pp");
  add(pc.embed.get(), "pp");
  add(pc.world.get(), "other");

  const ClockOffset clock = estimate_clock_offset(*pc.world);
  offset_ns_ = clock.offset_ns;
  int64_t origin = trace_clock_ns();
  pc.world->broadcast(&origin, 1, DType::kI64, 0);
  origin_ns_ = origin;
  int64_t mine[2] = {clock.offset_ns, clock.round_trip_ns};
  std::vector<int64_t> all(2 * size_t(pc.world->size()));
  pc.world->all_gather(mine, all.data(), 2, DType::kI64);
  for (int r = 0; r < pc.world->size(); ++r) {
    offsets_.push_back(all[2 * r]);
    round_trips_.push_back(all[2 * r + 1]);
  }
  if (pc.rank == 0) file_ = std::make_unique<TraceFileWriter>(path_);
}

StepTracer::~StepTracer() = default;

bool StepTracer::traces(int64_t step) const { return std::binary_search(steps_.begin(), steps_.end(), int(step)); }

void StepTracer::begin_step(int64_t step, Transformer& model, LayerHooks* inner) {
  step_ = step;
  active_ = true;
  for (size_t i = 0; i < groups_.size(); ++i) {
    // Kept over the run so that flow ids never repeat; emptied after every traced step.
    Group& g = groups_[i];
    if (!g.trace) g.trace = std::make_unique<CommTrace>(pc_.rank, offset_ns_, int(i));
    g.comm->set_trace(g.trace.get());
  }
  layers_ = std::make_unique<LayerRecorder>(*this, inner);
  model.set_layer_hooks(layers_.get());
}

void StepTracer::span(const std::string& name, const char* cat, Clock::time_point begin, Clock::time_point end,
                      nlohmann::json args) {
  if (active_) spans_.push_back({name, cat, steady_ns(begin), steady_ns(end), std::move(args)});
}

void StepTracer::add_actions(const StepTrace& trace) {
  if (!active_) return;
  const int64_t origin = steady_ns(trace.origin);
  for (const StepTrace::Event& e : trace.events) {
    const bool forward = e.action.op == PipelineOp::kForward;
    spans_.push_back({fmt::format("{} mb{}", forward ? "F" : "B", e.action.micro_batch), forward ? "forward" : "backward",
                      origin + int64_t(e.start_s * 1e9), origin + int64_t(e.end_s * 1e9),
                      {{"micro_batch", e.action.micro_batch}, {"chunk", e.action.chunk}, {"stage", pc_.coord.pp}}});
  }
}

nlohmann::json StepTracer::comm_split() {
  nlohmann::json out = nlohmann::json::object();
  if (active_)
    for (Group& g : groups_) g.comm->flush_trace();
  for (const Group& g : groups_) {
    if (!g.trace || !active_) continue;
    double waiting = 0, blocked = 0;
    for (const CommTraceEvent& e : g.trace->events()) {
      waiting += e.waited_seconds();
      blocked += e.blocked_seconds();
    }
    nlohmann::json& k = out[g.kind];
    if (k.is_null()) k = {{"waiting_s", 0.0}, {"transfer_s", 0.0}};
    k["waiting_s"] = k["waiting_s"].get<double>() + waiting;
    k["transfer_s"] = k["transfer_s"].get<double>() + (blocked - waiting);
  }
  return out;
}

void StepTracer::add_metadata() {
  const int pid = pc_.rank;
  const GridCoord& c = pc_.coord;
  events_.process_name(pid, fmt::format("rank {} @ {} (pp {} dp {} ep {} tp {})", pid, host_name(), c.pp, c.dp, c.ep, c.tp),
                       pid);
  events_.thread_name(pid, kComputeTid, "compute", 0);
  for (size_t i = 0; i < groups_.size(); ++i)
    events_.thread_name(pid, group_tid(int(i)), fmt::format("{} ({} ranks)", groups_[i].comm->name(), groups_[i].comm->size()),
                        int(i) + 1);
}

void StepTracer::add_comm_events(const Group& group, int index) {
  std::vector<CommTraceEvent> events = group.trace->events();
  std::sort(events.begin(), events.end(),
            [](const CommTraceEvent& a, const CommTraceEvent& b) { return a.launch_ns < b.launch_ns; });
  // Overlapping operations (bucketed gradient reductions in flight together) go to further lanes,
  // so that the slices of one track nest.
  std::vector<int64_t> lane_end;
  const std::vector<int>& members = group.comm->world_ranks();
  const int pid = pc_.rank;
  for (const CommTraceEvent& e : events) {
    size_t lane = 0;
    while (lane < lane_end.size() && lane_end[lane] > e.launch_ns) ++lane;
    if (lane == lane_end.size()) {
      lane_end.push_back(0);
      if (lane > 0)
        events_.thread_name(pid, group_tid(index) + int(lane), fmt::format("{} #{}", group.comm->name(), lane + 1),
                            index + 1);
    }
    lane_end[lane] = std::max(e.end_ns, e.launch_ns + 1);
    const int tid = group_tid(index) + int(lane);
    const double waited = e.waited_seconds(), blocked = e.blocked_seconds();
    nlohmann::json args = {{"group", group.comm->name()}, {"bytes", e.bytes}, {"blocked_us", blocked * 1e6},
                           {"waiting_us", waited * 1e6}, {"transfer_us", (blocked - waited) * 1e6}};
    const bool p2p = e.peer >= 0;
    if (p2p) args["peer_world_rank"] = members[e.peer];
    if (!p2p && e.last_member >= 0) args["last_arrival_world_rank"] = members[e.last_member];
    const double begin = to_us(e.launch_ns), end = to_us(std::max(e.end_ns, e.launch_ns));
    events_.complete(pid, tid, e.label, "comm", begin, end - begin, std::move(args));
    if (blocked > 0) {
      const int64_t split = e.wait_ns + int64_t(waited * 1e9);
      if (waited > 0) {
        const std::string who = p2p ? fmt::format("waiting for rank {}", members[e.peer])
                                    : fmt::format("waiting for rank {}", members[e.last_member]);
        events_.complete(pid, tid, who, "comm_wait", to_us(e.wait_ns), to_us(split) - to_us(e.wait_ns));
      }
      if (e.end_ns > split) events_.complete(pid, tid, "transfer", "comm_transfer", to_us(split), end - to_us(split));
    }
    if (e.flow_id != 0) {
      const double inset = std::min((end - begin) / 2, 1.0);
      if (std::string_view(e.label) == "send")
        events_.flow_start(pid, tid, "pipeline", e.flow_id, begin + inset);
      else
        events_.flow_end(pid, tid, "pipeline", e.flow_id, end - inset);
    }
  }
}

void StepTracer::end_step(Transformer& model, LayerHooks* inner) {
  if (!active_) return;
  const auto started = Clock::now();
  for (Group& g : groups_) {
    g.comm->flush_trace();
    g.comm->set_trace(nullptr);
  }
  model.set_layer_hooks(inner);
  active_ = false;
  if (!metadata_written_) add_metadata();
  metadata_written_ = true;
  for (const Span& s : spans_) {
    nlohmann::json args = s.args;
    if (args.is_null()) args = nlohmann::json::object();
    args["step"] = step_;
    events_.complete(pc_.rank, kComputeTid, s.name, s.cat, to_us(s.begin_ns), to_us(s.end_ns) - to_us(s.begin_ns),
                     std::move(args));
  }
  for (size_t i = 0; i < groups_.size(); ++i) add_comm_events(groups_[i], int(i));
  spans_.clear();
  for (Group& g : groups_) g.trace->clear();
  layers_.reset();
  gather_and_write();
  end_step_seconds_.push_back(std::chrono::duration<double>(Clock::now() - started).count());
}

void StepTracer::gather_and_write() {
  Communicator& world = *pc_.world;
  const std::string& mine = events_.serialized();
  if (pc_.rank == 0) {
    file_->append(mine);
    for (int r = 1; r < world.size(); ++r) {
      int64_t length = 0;
      world.recv(&length, 1, DType::kI64, r, kTagTraceLength);
      std::string text(size_t(length), '\0');
      if (length > 0) world.recv(text.data(), size_t(length), DType::kU8, r, kTagTraceData);
      file_->append(text);
    }
  } else {
    const int64_t length = int64_t(mine.size());
    world.send(&length, 1, DType::kI64, 0, kTagTraceLength);
    if (length > 0) world.send(mine.data(), mine.size(), DType::kU8, 0, kTagTraceData);
  }
  events_.clear();
}

void StepTracer::finish() {
  if (finished_) return;
  finished_ = true;
  if (!file_) return;
  nlohmann::json ranks = nlohmann::json::array();
  for (size_t r = 0; r < offsets_.size(); ++r)
    ranks.push_back({{"rank", r}, {"clock_offset_ns", offsets_[r]}, {"clock_error_bound_ns", round_trips_[r] / 2}});
  file_->close({{"producer", "moe4d"}, {"traced_steps", steps_}, {"world_size", pc_.world->size()},
                {"clock_offsets", ranks}, {"end_step_seconds", end_step_seconds_}});
}

}  // namespace moe4d
