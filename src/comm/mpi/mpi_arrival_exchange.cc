#include "comm/mpi/mpi_arrival_exchange.h"

#include <algorithm>

#include "core/check.h"

namespace moe4d {

MpiArrivalExchange::MpiArrivalExchange(CommTrace& trace, MPI_Comm trace_comm, int group_size, Kind kind, CommOp op,
                                       const char* label, size_t bytes, int peer, int tag, int64_t entry_ns)
    : trace_(trace), kind_(kind) {
  event_.op = op;
  event_.label = label;
  event_.bytes = int64_t(bytes);
  event_.launch_ns = entry_ns;
  event_.peer = peer;
  mine_[0] = trace.to_reference(entry_ns);
  int rc = MPI_SUCCESS;
  switch (kind) {
    case Kind::kCollective:
      arrivals_.resize(size_t(group_size));
      rc = MPI_Iallgather(mine_, 1, MPI_INT64_T, arrivals_.data(), 1, MPI_INT64_T, trace_comm, &request_);
      break;
    case Kind::kSend:
      mine_[1] = event_.flow_id = trace.next_flow_id();
      rc = MPI_Isend(mine_, 2, MPI_INT64_T, peer, tag, trace_comm, &request_);
      break;
    case Kind::kRecv:
      arrivals_.resize(2);
      rc = MPI_Irecv(arrivals_.data(), 2, MPI_INT64_T, peer, tag, trace_comm, &request_);
      break;
  }
  MOE4D_CHECK_MSG(rc == MPI_SUCCESS, "trace entry-time exchange failed to start");
}

MpiArrivalExchange::~MpiArrivalExchange() {
  if (event_.end_ns == 0) event_.end_ns = trace_clock_ns();
  complete();
}

bool MpiArrivalExchange::finish(int64_t end_ns) {
  if (finished_) return true;
  event_.end_ns = end_ns;
  int done = 0;
  MPI_Test(&request_, &done, MPI_STATUS_IGNORE);
  if (done) complete();
  return done != 0;
}

void MpiArrivalExchange::complete() {
  if (finished_) return;
  finished_ = true;
  // The partners entered before the operation could complete, so their messages are under way.
  MPI_Wait(&request_, MPI_STATUS_IGNORE);
  if (kind_ == Kind::kCollective) {
    const auto last = std::max_element(arrivals_.begin(), arrivals_.end());
    event_.last_member = int(last - arrivals_.begin());
    event_.last_arrival_ns = trace_.to_local(*last);
  } else if (kind_ == Kind::kRecv) {
    event_.last_arrival_ns = trace_.to_local(arrivals_[0]);
    event_.flow_id = arrivals_[1];
  }
  trace_.add(event_);
}

}  // namespace moe4d
