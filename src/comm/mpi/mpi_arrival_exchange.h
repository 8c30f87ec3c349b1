// comm/mpi/mpi_arrival_exchange.h — the entry-time exchange of one traced MPI operation (comm/comm_trace.h).
//
// Started right after the operation itself, on the group's private trace communicator (a dup, so it
// can never match the operation's own messages):
//   collectives: MPI_Iallgather of every member's entry time (reference clock): 8 bytes per member;
//   send: MPI_Isend of {entry time, flow id} to the receiver, same tag; recv: the matching MPI_Irecv.
// Non-blocking, so it changes neither the operation's overlap with compute nor its order; it
// progresses inside the operation's own MPI calls and is finished (MPI_Wait) when the operation
// completes, which then appends its CommTraceEvent to the trace.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "comm/comm_trace.h"

namespace moe4d {

class MpiArrivalExchange {
 public:
  enum class Kind { kCollective, kSend, kRecv };
  // entry_ns: this rank's clock when the operation was started.
  MpiArrivalExchange(CommTrace& trace, MPI_Comm trace_comm, int group_size, Kind kind, CommOp op, const char* label,
                     size_t bytes, int peer, int tag, int64_t entry_ns);
  ~MpiArrivalExchange();
  MpiArrivalExchange(const MpiArrivalExchange&) = delete;
  MpiArrivalExchange& operator=(const MpiArrivalExchange&) = delete;

  // The caller starts blocking on the operation (first call counts).
  void note_wait(int64_t now_ns) {
    if (event_.wait_ns == 0) event_.wait_ns = now_ns;
  }
  // The operation completed at end_ns. Returns true when the exchange is complete too and the event
  // was recorded; false: call complete() later (the exchange stays in flight, off the critical path).
  bool finish(int64_t end_ns);
  // Waits for the exchange and records the event (once).
  void complete();

 private:
  CommTrace& trace_;
  Kind kind_;
  CommTraceEvent event_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  int64_t mine_[2] = {0, 0};      // entry (reference clock), flow id
  std::vector<int64_t> arrivals_;  // collectives: every member's entry; recv: the sender's {entry, flow}
  bool finished_ = false;
};

}  // namespace moe4d
