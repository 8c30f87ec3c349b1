// comm/mpi/mpi_communicator.h — the MPI backend of Communicator (OpenMPI on CPU clusters, between nodes).
//
// Every operation is a non-blocking MPI call (MPI_Iallreduce, MPI_Ireduce_scatter_block,
// MPI_Iallgather, MPI_Ialltoallv, MPI_Ibcast, MPI_Isend/MPI_Irecv, MPI_Ibarrier) on a private dup of
// the group's MPI communicator, returning a Work whose wait() polls with a short back-off (spin, then
// yield, then short sleeps, so oversubscribed ranks do not starve each other) until completion or
// the deadline (CommOptions::timeout_seconds, counted from the start of wait()). On a deadline the
// census of comm/mpi/mpi_census.h names the missing rank(s) and the job aborts with exit code 3.
//
// Overlap: operations of at least MpiOptions::progress_min_bytes are handed to a progress thread
// (comm/mpi/mpi_progress_engine.h) shared by the world and every group split from it, so that a
// gradient all_reduce started during backward keeps moving while the main thread computes; wait()
// takes the request back from the thread and finishes it by polling, test() only looks at the
// thread's result. Smaller operations (latency-bound TP/EP traffic) are only ever polled.
//
// Limits: counts and displacements must fit MPI's int (INT_MAX elements) — larger ones throw
// moe4d::Error. BF16/F16 reductions run through user-defined MPI_Ops (comm/mpi/mpi_reduce_ops.h).
// In place: reduce_scatter with send == recv uses MPI_IN_PLACE (result in the first recv_count
// elements); all_gather with send == recv + rank()*send_count likewise.
//
// Lifetime: MPI must be initialised with MPI_THREAD_MULTIPLE (comm/mpi/mpi_runtime.h) and every
// communicator destroyed before MPI_Finalize; every Work must be waited on (or destroyed, which
// waits) before its communicator is destroyed. Thread safety: as Communicator.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/mpi/mpi_census.h"
#include "comm/mpi/mpi_watchdog.h"
#include "comm/mpi/mpi_tuning.h"

namespace moe4d {

// Backend settings; the defaults are what comm_bench measured best (see bench/comm).
struct MpiOptions {
  bool progress_thread = true;                            // run the progress thread at all
  size_t progress_min_bytes = size_t{256} << 10;          // smaller operations are only polled by the caller
  std::chrono::microseconds progress_poll_interval{200};  // how often the thread tests while nobody waits
  // OpenMPI libnbc's iallreduce algorithm, set process-wide by world() (comm/mpi/mpi_tuning.h).
  NbcAllReduceAlgorithm all_reduce_algorithm = NbcAllReduceAlgorithm::kRabenseifner;
};

class MpiReduceOps;
class MpiProgressEngine;
class MpiCensus;
class MpiArrivalExchange;

class MpiCommunicator final : public Communicator, private MpiWatchdog::Client {
 public:
  // Wraps a dup of MPI_COMM_WORLD, named "world". Collective over all processes.
  static std::unique_ptr<MpiCommunicator> world(const CommOptions& options = {}, const MpiOptions& mpi = {});
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::vector<int>& world_ranks() const override { return world_ranks_; }
  const std::string& name() const override { return name_; }
  const char* backend() const override { return "mpi"; }

  std::unique_ptr<Work> all_reduce_async(void* data, size_t count, DType dtype, ReduceOp op) override;
  std::unique_ptr<Work> reduce_scatter_async(const void* send, void* recv, size_t recv_count, DType dtype,
                                             ReduceOp op) override;
  std::unique_ptr<Work> all_gather_async(const void* send, void* recv, size_t send_count, DType dtype) override;
  std::unique_ptr<Work> all_to_all_v_async(const void* send, const size_t* send_counts, const size_t* send_displs,
                                           void* recv, const size_t* recv_counts, const size_t* recv_displs,
                                           DType dtype) override;
  std::unique_ptr<Work> broadcast_async(void* data, size_t count, DType dtype, int root) override;
  std::unique_ptr<Work> send_async(const void* data, size_t count, DType dtype, int dst, int tag) override;
  std::unique_ptr<Work> recv_async(void* data, size_t count, DType dtype, int src, int tag) override;
  void barrier() override;

  // Blocking forms: MPI's blocking calls (lower latency than the non-blocking ones), with the
  // deadline enforced by the watchdog thread (comm/mpi/mpi_watchdog.h).
  using Communicator::all_reduce;
  void all_reduce(void* data, size_t count, DType dtype, ReduceOp op = ReduceOp::kSum) override;
  void reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype,
                      ReduceOp op = ReduceOp::kSum) override;
  void all_gather(const void* send, void* recv, size_t send_count, DType dtype) override;
  void all_to_all_v(const void* send, const size_t* send_counts, const size_t* send_displs, void* recv,
                    const size_t* recv_counts, const size_t* recv_displs, DType dtype) override;
  void broadcast(void* data, size_t count, DType dtype, int root) override;
  void send(const void* data, size_t count, DType dtype, int dst, int tag) override;
  void recv(void* data, size_t count, DType dtype, int src, int tag) override;

  // A negative color returns nullptr on that rank (MPI_UNDEFINED). The child inherits the options
  // and shares the progress thread. Guarded by the deadline: every member must arrive.
  std::unique_ptr<Communicator> split(int color, int key, const std::string& name) override;
  void flush_trace() override;

  // Node topology from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED); contract in comm/communicator.h.
  std::unique_ptr<Communicator> split_node(const std::string& name) override;
  int detect_ranks_per_node() override;

  double timeout_seconds() const override { return options_.timeout_seconds; }
  void set_timeout_seconds(double seconds) override { options_.timeout_seconds = seconds; }
  const CommOptions& options() const { return options_; }
  MPI_Comm handle() const { return comm_; }  // for raw-MPI comparisons in benchmarks and tests

 private:
  friend class MpiWork;
  struct Shared;  // reduce ops and progress engine, shared by a world and all its descendants
  class WaitingMark;

  MpiCommunicator(MPI_Comm comm, std::string name, const CommOptions& options, std::shared_ptr<Shared> shared);

  // Wraps a started request into a Work; `seq` > 0 for collectives (their census sequence number).
  // `tag`: of a send / recv (for the traced entry-time exchange).
  std::unique_ptr<Work> make_work(CommOp op, const char* label, size_t bytes, MPI_Request request, int64_t seq,
                                  int peer, std::vector<int> owned_arrays = {}, int tag = 0);
  // On a traced step (trace_ set): the entry-time exchange of an operation started now.
  std::unique_ptr<MpiArrivalExchange> start_exchange(CommOp op, const char* label, size_t bytes, int peer, int tag);
  int64_t next_seq() { return issued_.fetch_add(1) + 1; }
  // Adds `bytes` sent to group rank `peer` to the link-class counters of `op` (self: neither).
  void count_link(CommOp op, int peer, size_t bytes);
  // Runs a blocking MPI call, publishing to the watchdog that this thread is inside it.
  template <typename Call>
  void run_blocking(CommOp op, const char* label, size_t bytes, int peer, Call&& call, int tag = 0);
  void watchdog_poll(std::chrono::steady_clock::time_point now) override;
  void check(int rc, const char* call) const;
  int to_count(size_t count, const char* op) const;
  [[noreturn]] void on_timeout(const char* label, int64_t seq, int peer, double waited);
  // What this rank answers a census query on this group with (comm/mpi/mpi_census.h).
  CensusAnswer census_answer() const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm trace_comm_ = MPI_COMM_NULL;  // private dup for the traced entry-time exchange
  std::string name_;
  CommOptions options_;
  std::shared_ptr<Shared> shared_;
  std::unique_ptr<MpiCensus> census_;
  int rank_ = 0;
  int size_ = 1;
  std::vector<int> world_ranks_;
  std::vector<char> same_node_;  // by group rank: runs on this rank's host (MPI_Get_processor_name)
  std::atomic<int64_t> issued_{0};  // collectives started on this group (the census sequence)
  // What the issuing thread is blocked in (read by the watchdog thread): since = 0 when not blocked.
  std::atomic<int64_t> blocked_since_ns_{0};
  std::atomic<const char*> blocked_label_{""};
  std::atomic<int64_t> blocked_seq_{0};
  std::atomic<int> blocked_peer_{-1};
  // Per CommOp: the latest completion already counted as busy, so that operations in flight at the
  // same time count their common wall time once.
  std::chrono::steady_clock::time_point busy_frontier_[static_cast<int>(CommOp::kCount)] = {};
  std::vector<int> alltoallv_arrays_;  // int counts and displacements of the blocking all_to_all_v
  // Traced operations that completed before their entry-time exchange did (flush_trace waits).
  std::vector<std::unique_ptr<MpiArrivalExchange>> pending_exchanges_;
};

}  // namespace moe4d
