// comm/mpi/mpi_census.h — who is missing when a collective passes its deadline.
//
// Every MpiCommunicator owns a census: a private duplicate of its MPI communicator (so census
// messages can never match the group's own traffic) on which members exchange a CensusAnswer: the
// count of collectives they have started on the group, and what (if anything) the process is
// waiting in right now, on any group.
//
// Protocol. A rank whose wait passed the deadline posts a query to every other member and keeps
// answering queries itself for a grace period. A member answers whenever its process is waiting in
// any collective (wait loops call serve() every few milliseconds, and the watchdog thread serves
// every group while the process is blocked anywhere); the normal path pays nothing else. Members
// that have not started the stuck collective are late, and fall in two kinds:
//  - missing: no answer within the grace period (dead, stopped, or busy outside MPI) — the cause;
//  - blocked behind: they answered from inside another collective (on another group) that waits
//    for someone else — a consequence, named separately so that they are not mistaken for it.
// The rank then prints one line naming each late rank with its host, e.g.
//   collective timeout: all_reduce on group world (world ranks 0,1,2) waited 30.0 s; missing rank(s): 2 (world)
//   [rank 2 on node-b: no answer (dead, stopped, or busy outside MPI)]; blocked behind them: rank 1 on node-a
//   (waiting 29.8 s in all_reduce on group tp[dp=0,ep=0,pp=0])
// and calls MPI_Abort(MPI_COMM_WORLD, 3), so the job exits non-zero instead of hanging. A rank whose
// late members are all blocked behind others holds its report back (answering queries) until the
// deadline of the longest-waiting of them has passed plus two grace periods: the rank waiting on the
// cause then reports first, and the job's first line names the rank that never arrived.
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

// What a member says about itself when asked (sent as bytes: plain data, fixed size).
struct CensusAnswer {
  int64_t issued = 0;           // collectives this rank has started on the asking group
  double waiting_seconds = -1;  // how long the process has been waiting in a collective (< 0: it is not)
  char waiting_in[112] = {};    // "all_reduce on group tp[dp=0,ep=0,pp=0]" (empty: not waiting)
};

// A member that had not started the stuck collective.
struct LateMember {
  int rank = 0;           // group rank
  bool answered = false;  // false: missing (the cause); true: blocked behind, see `answer`
  CensusAnswer answer;
};

class MpiCensus {
 public:
  // Duplicates `group_comm` (collective over it).
  explicit MpiCensus(MPI_Comm group_comm);
  ~MpiCensus();
  MpiCensus(const MpiCensus&) = delete;
  MpiCensus& operator=(const MpiCensus&) = delete;

  // Answers pending queries with `mine`. Cheap when there are none: one MPI_Iprobe.
  void serve(const CensusAnswer& mine);
  // serve() unless another thread is using the census right now (the watchdog's form).
  void try_serve(const CensusAnswer& mine);

  // Runs the protocol for the collective with sequence number `seq` (1-based) and returns the
  // late members (those whose answer, if any, has fewer than `seq` collectives started). Blocks for
  // at most `grace_seconds`.
  std::vector<LateMember> find_late(int64_t seq, const CensusAnswer& mine, double grace_seconds);

 private:
  void serve_locked(const CensusAnswer& mine);

  std::mutex mutex_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  std::vector<int64_t> query_payload_;  // one per member: Isend buffers that outlive the call
  std::vector<MPI_Request> query_requests_;
};

// Prints the one-line timeout report (see above) to stderr and aborts the whole job with code 3.
// `late` holds group ranks; `world_ranks` maps them to world ranks and `hosts` (by world rank,
// may be empty) to host names. `late` empty means every member had started the collective (the
// ranks issued different collectives or the transport is stuck).
[[noreturn]] void abort_on_collective_timeout(const char* operation, const std::string& group,
                                              const std::vector<int>& world_ranks, double waited_seconds,
                                              const std::vector<LateMember>& late,
                                              const std::vector<std::string>& hosts);

}  // namespace moe4d
