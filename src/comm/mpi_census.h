// comm/mpi_census.h — who is missing when a collective passes its deadline.
//
// Every MpiCommunicator owns a census: a private duplicate of its MPI communicator (so census
// messages can never match the group's own traffic) on which members exchange one number each:
// the count of collectives they have started on the group.
//
// Protocol. A rank whose wait passed the deadline posts a query to every other member and keeps
// answering queries itself for a grace period. A member answers a query whenever it is waiting on
// the group (wait loops call serve() every few milliseconds; the normal path pays nothing else).
// Members that do not answer within the grace period (dead, stuck elsewhere, or busy outside any
// collective of this group), or answer with fewer collectives started than the stuck one's sequence
// number (they have not joined it yet), are the missing ranks. The rank then prints one line
//   collective timeout: all_reduce on group tp[dp=0,ep=0,pp=0] (world ranks 0,1,2,3) waited 30.0 s; missing rank(s): 2 (world)
// and calls MPI_Abort(MPI_COMM_WORLD, 3), so the job exits non-zero instead of hanging.
//
// Thread safety: the issuing thread (in wait loops) and the watchdog thread (while the issuing thread
// is blocked in MPI) may both serve; one mutex serialises them.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace moe4d {

class MpiCensus {
 public:
  // Duplicates `group_comm` (collective over it).
  explicit MpiCensus(MPI_Comm group_comm);
  ~MpiCensus();
  MpiCensus(const MpiCensus&) = delete;
  MpiCensus& operator=(const MpiCensus&) = delete;

  // Answers pending queries with `issued` (collectives this rank has started on the group). Cheap
  // when there are none: one MPI_Iprobe.
  void serve(int64_t issued);
  // serve() unless another thread is using the census right now (the watchdog's form).
  void try_serve(int64_t issued);

  // Runs the protocol for the collective with sequence number `seq` (1-based) and returns the
  // group ranks that are missing. Blocks for at most `grace_seconds`.
  std::vector<int> find_missing(int64_t seq, int64_t issued, double grace_seconds);

 private:
  void serve_locked(int64_t issued);

  std::mutex mutex_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  std::vector<int64_t> query_payload_;  // one per member: Isend buffers that outlive the call
  std::vector<MPI_Request> query_requests_;
};

// Prints the one-line timeout report (see above) to stderr and aborts the whole job with code 3.
// `missing_world` empty means every member answered (the collective is stuck or mismatched).
[[noreturn]] void abort_on_collective_timeout(const char* operation, const std::string& group,
                                              const std::vector<int>& world_ranks, double waited_seconds,
                                              const std::vector<int>& missing_world);

}  // namespace moe4d
