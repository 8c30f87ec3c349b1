// train/step_tracer.h — the traced steps of train.trace_steps: collects what every rank did during
// them and writes one Chrome Trace / Perfetto file for the run on world rank 0 (docs/tracing.md).
//
// Per rank (one trace process, pid = world rank, named with host and grid coordinates):
//   track "compute": the step and its phases (forward/backward, gradient sync, optimizer, ...), every
//     micro-batch forward / backward, every layer inside it, evaluation, checkpoint;
//   one track per communicator (more "lanes" when its operations overlap): every operation from
//     launch to completion, with the part the rank sat blocked split into "waiting for rank N"
//     (until the last member arrived) and "transfer" (comm/comm_trace.h); pipeline sends and
//     receives joined by flow arrows.
// Clocks: each rank's offset from rank 0's clock is measured at construction (comm/clock_sync.h)
// and removed, so the ranks line up; times are microseconds since the tracer started on rank 0.
// At the end of every traced step the ranks' events are gathered to rank 0 (send/recv over the
// world, untraced) and appended to the gzip file, so memory holds one step at a time.
//
// Collective: the constructor, begin_step, end_step and finish are called by every rank at the same
// point (all ranks trace the same steps). One thread, the trainer's.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/comm_trace.h"
#include "model/layer_hooks.h"
#include "model/transformer.h"
#include "parallel/parallel_context.h"
#include "train/step_executor.h"
#include "trace/trace_event_list.h"
#include "trace/trace_file_writer.h"

namespace moe4d {

class StepTracer {
 public:
  using Clock = std::chrono::steady_clock;

  // steps: ascending; path: the trace file (created on world rank 0); num_layers names the layers.
  StepTracer(std::vector<int> steps, ParallelContext& pc, const std::string& path, int num_layers);
  ~StepTracer();
  StepTracer(const StepTracer&) = delete;
  StepTracer& operator=(const StepTracer&) = delete;

  bool traces(int64_t step) const;
  bool active() const { return active_; }
  const std::string& path() const { return path_; }

  // Attaches a CommTrace to every communicator of pc and puts a recording wrapper around the
  // model's layer hooks (`inner`, possibly null, still runs inside it).
  void begin_step(int64_t step, Transformer& model, LayerHooks* inner);
  // A span of the compute track while a step is traced (ignored otherwise).
  void span(const std::string& name, const char* cat, Clock::time_point begin, Clock::time_point end,
            nlohmann::json args = nullptr);
  // The forwards / backwards of the step's micro-batches.
  void add_actions(const StepTrace& trace);
  // Seconds this rank sat blocked in each group kind (tp, ep, dp, pp, other — as the metrics' time.comm)
  // during the traced step so far, split into {"waiting_s", "transfer_s"}.
  // Completes the groups' pending entry-time exchanges first (collective over the groups).
  nlohmann::json comm_split();
  // Detaches, restores `inner` as the model's hooks, gathers every rank's events to rank 0 and appends
  // them to the file.
  void end_step(Transformer& model, LayerHooks* inner);
  // Ends the file (rank 0) with the run's clock offsets and the time each end_step took (the cost of
  // tracing outside the step). Later calls do nothing. Not collective.
  void finish();

 private:
  struct Group {
    Communicator* comm;
    std::string kind;  // tp, ep, dp, pp, other
    std::unique_ptr<CommTrace> trace;
  };
  struct Span {
    std::string name;
    const char* cat;
    int64_t begin_ns, end_ns;  // this rank's steady clock
    nlohmann::json args;
  };
  class LayerRecorder;

  double to_us(int64_t local_ns) const { return double(local_ns - offset_ns_ - origin_ns_) * 1e-3; }
  void add_metadata();
  void add_comm_events(const Group& group, int index);
  void gather_and_write();

  std::vector<int> steps_;
  ParallelContext& pc_;
  std::string path_;
  int num_layers_;
  std::vector<Group> groups_;
  std::unique_ptr<LayerRecorder> layers_;
  std::unique_ptr<TraceFileWriter> file_;  // world rank 0
  int64_t offset_ns_ = 0;                  // this rank's clock minus rank 0's
  int64_t origin_ns_ = 0;                  // rank 0's clock when tracing started
  std::vector<int64_t> offsets_, round_trips_;  // of every rank (rank 0 only)
  std::vector<Span> spans_;
  std::vector<double> end_step_seconds_;  // gather + write of every traced step
  TraceEventList events_;
  int64_t step_ = 0;
  bool active_ = false, metadata_written_ = false, finished_ = false;
};

}  // namespace moe4d
