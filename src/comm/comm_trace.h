// comm/comm_trace.h — what a communicator records about each operation on a traced step.
//
// Tracing is off unless a CommTrace is attached (Communicator::set_trace): then every operation
// appends one CommTraceEvent when it completes, and the MPI backend also exchanges entry times
// between the members — all collectives: an all-gather of every member's entry time on a private
// dup of the group; point-to-point: the sender passes its entry time and a flow id to the receiver —
// so that the time a rank sat blocked splits into "waiting for the last member to arrive" (skew:
// a slow rank, a late pipeline stage, a busy core) and "transfer after everyone arrived".
//
// Times are this rank's steady_clock nanoseconds; entry times of other members are exchanged on the
// reference clock (world rank 0's, through clock_offset_ns: comm/clock_sync.h) and converted back.
//
// Contract: attach and detach on every member of a group at the same point of the program (between
// operations, with none in flight), because a traced operation does one more collective on the
// private dup of the group. One thread per communicator, as for the operations themselves.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/communicator.h"

namespace moe4d {

struct CommTraceEvent {
  CommOp op = CommOp::kBarrier;
  const char* label = "";  // "all_reduce", "send", ...
  int64_t bytes = 0;       // this rank's contribution (send side)
  int64_t launch_ns = 0;   // operation started
  int64_t wait_ns = 0;     // the caller began to block on it (0: never blocked, it completed in test())
  int64_t end_ns = 0;      // completion observed
  // Collectives: when the last member entered (this rank's clock; 0 if unknown, e.g. one member);
  // a receive: when the sender entered its send.
  int64_t last_arrival_ns = 0;
  int last_member = -1;  // group rank of the last member to enter (collectives)
  int peer = -1;         // point-to-point: group rank of the partner
  int64_t flow_id = 0;   // point-to-point: the same id on the send and its receive (0: none)

  // The part of [wait_ns, end_ns] before the last member arrived, and the rest.
  double waited_seconds() const;
  double blocked_seconds() const { return wait_ns > 0 && end_ns > wait_ns ? (end_ns - wait_ns) * 1e-9 : 0.0; }
};

class CommTrace {
 public:
  // clock_offset_ns: this rank's clock minus the reference clock (comm/clock_sync.h). `stream`
  // tells apart the traces of one rank's communicators (< 256) in flow ids.
  CommTrace(int world_rank, int64_t clock_offset_ns, int stream = 0)
      : world_rank_(world_rank), stream_(stream), clock_offset_ns_(clock_offset_ns) {}

  int64_t to_reference(int64_t local_ns) const { return local_ns - clock_offset_ns_; }
  int64_t to_local(int64_t reference_ns) const { return reference_ns + clock_offset_ns_; }
  int64_t clock_offset_ns() const { return clock_offset_ns_; }
  // A flow id unique over the world and the run: sender's world rank, stream, then a counter.
  int64_t next_flow_id() { return (int64_t(world_rank_ + 1) << 40) | (int64_t(stream_ & 0xff) << 32) | ++flows_; }

  void add(const CommTraceEvent& event) { events_.push_back(event); }
  const std::vector<CommTraceEvent>& events() const { return events_; }
  void clear() { events_.clear(); }

 private:
  int world_rank_;
  int stream_;
  int64_t clock_offset_ns_;
  int64_t flows_ = 0;
  std::vector<CommTraceEvent> events_;
};

// steady_clock now, in nanoseconds (the clock of CommTraceEvent).
int64_t trace_clock_ns();

}  // namespace moe4d
