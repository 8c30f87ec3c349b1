// comm/communicator.h — the one interface every collective in moe4d goes through.
//
// A Communicator is a group of ranks (the world, or a TP/EP/DP/PP group cut from the rank grid).
// Backends: LocalCommunicator (one rank, no MPI: unit tests and single-process runs), MpiCommunicator
// (OpenMPI; comm/mpi/mpi_communicator.h) and, later, NCCL bootstrapped through MPI. This interface,
// the local backend and what every backend shares (traces, clock offsets, the 16-bit wire formats)
// are the library moe4d_comm; each backend is a library of its own (moe4d_comm_mpi, src/comm/mpi/),
// linked by whoever creates the world communicator (the CLI, the MPI tests and benchmarks). Model,
// training and planning code only see this interface (PyTorch c10d `Backend`/`Work` style) and call
// no backend function.
//
// Contract:
// - Every rank of the group calls the same collectives in the same order (MPI semantics).
// - Every buffer lives on the communicator's device() (the host for MPI and local; a rank's GPU for
//   NCCL, as c10d binds a process group to a device); counts are in elements of `dtype`. Whoever
//   pairs a communicator with a compute backend checks that their devices agree (the Trainer does).
// - Operations are ordered on the communicator's queue() (core/allocator.h; set_queue): a device
//   backend enqueues a collective behind the kernels already on that queue, so its input is ready
//   without a host synchronisation. On the host a queue orders nothing (every call runs at once).
// - `*_async` starts the operation and returns a Work; the buffers must stay alive and untouched
//   until wait() returns. The blocking forms are async(...)->wait().
// - Deadline: every wait has a deadline (CommOptions::timeout_seconds). A rank that does not arrive in
//   time is reported — group name, operation, the missing rank(s) — and the job exits non-zero
//   (MPI_Abort) instead of hanging.
// - Thread safety: one thread issues operations on a given communicator; different communicators
//   may be used from different threads (the MPI backend initialises MPI_THREAD_MULTIPLE).
// - An operation a backend cannot do fails with a message naming the backend and the operation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace moe4d {

class CommTrace;

enum class ReduceOp { kSum, kMax, kMin };

enum class CommOp { kAllReduce, kReduceScatter, kAllGather, kAllToAllV, kBroadcast, kSendRecv, kBarrier, kCount };
const char* comm_op_name(CommOp op);  // "all_reduce", ...

struct CommOptions {
  double timeout_seconds = 300.0;
};

// Counters per operation kind, for the per-step timing breakdown. busy = wall time during which at
// least one operation of that kind was in flight (start to observed completion; overlapping
// operations count their common time once); exposed = time the caller sat blocked inside wait()
// (communication not hidden by compute).
struct CommStats {
  struct Entry {
    int64_t calls = 0;
    int64_t bytes = 0;        // bytes this rank contributed (send side)
    double busy_seconds = 0;
    double exposed_seconds = 0;
    // The part of `bytes` that left this rank for another rank of its own node / of another node
    // (point-to-point sends and all-to-all, where each destination is known; a collective's internal
    // algorithm decides its own links, so all_reduce / all_gather / ... count 0 in both).
    int64_t bytes_intra_node = 0;
    int64_t bytes_inter_node = 0;
  };
  Entry ops[static_cast<int>(CommOp::kCount)];
  Entry& operator[](CommOp op) { return ops[static_cast<int>(op)]; }
  const Entry& operator[](CommOp op) const { return ops[static_cast<int>(op)]; }
  void add(const CommStats& other);
  void clear() { *this = CommStats{}; }
};

// Handle of an asynchronous operation.
class Work {
 public:
  virtual ~Work() = default;
  // Blocks until complete (or the deadline passes: see the contract above).
  virtual void wait() = 0;
  // Non-blocking completion check; also drives progress of the operation.
  virtual bool test() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // World ranks of the members, in group-rank order (for diagnostics and placement maps).
  virtual const std::vector<int>& world_ranks() const = 0;
  virtual const std::string& name() const = 0;  // e.g. "tp[pp=0,dp=1,ep=0]"
  virtual const char* backend() const = 0;      // "local", "mpi", "nccl"
  // Where the buffers of every operation live (see the contract above).
  virtual Device device() const { return kHostDevice; }
  // The queue later operations are ordered on; the default queue (0) until set. Host backends keep
  // it only to report it: on the host there is nothing to order.
  void set_queue(Queue queue) { queue_ = queue; }
  Queue queue() const { return queue_; }

  // In place: data[count] = reduce over ranks of data[count].
  virtual std::unique_ptr<Work> all_reduce_async(void* data, size_t count, DType dtype, ReduceOp op) = 0;
  // send[size() * recv_count] -> recv[recv_count]: this rank gets block rank() of the reduction.
  virtual std::unique_ptr<Work> reduce_scatter_async(const void* send, void* recv, size_t recv_count, DType dtype,
                                                     ReduceOp op) = 0;
  // send[send_count] from every rank -> recv[size() * send_count], in rank order.
  virtual std::unique_ptr<Work> all_gather_async(const void* send, void* recv, size_t send_count, DType dtype) = 0;
  // Variable all-to-all; counts and displacements in elements, one entry per rank.
  virtual std::unique_ptr<Work> all_to_all_v_async(const void* send, const size_t* send_counts,
                                                   const size_t* send_displs, void* recv, const size_t* recv_counts,
                                                   const size_t* recv_displs, DType dtype) = 0;
  virtual std::unique_ptr<Work> broadcast_async(void* data, size_t count, DType dtype, int root) = 0;
  virtual std::unique_ptr<Work> send_async(const void* data, size_t count, DType dtype, int dst, int tag) = 0;
  virtual std::unique_ptr<Work> recv_async(void* data, size_t count, DType dtype, int src, int tag) = 0;
  virtual void barrier() = 0;

  // MPI_Comm_split semantics: ranks passing the same color form a group, ordered by key.
  // Collective over this communicator.
  virtual std::unique_ptr<Communicator> split(int color, int key, const std::string& name) = 0;

  // Blocking forms. By default async(...)->wait(); a backend may run them directly (the MPI backend
  // calls MPI's blocking collectives, which have lower latency, under a watchdog deadline).
  virtual void all_reduce(void* data, size_t count, DType dtype, ReduceOp op = ReduceOp::kSum) {
    all_reduce_async(data, count, dtype, op)->wait();
  }
  void all_reduce(float* data, size_t count, ReduceOp op = ReduceOp::kSum) {
    all_reduce(data, count, DType::kF32, op);
  }
  virtual void reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype,
                              ReduceOp op = ReduceOp::kSum) {
    reduce_scatter_async(send, recv, recv_count, dtype, op)->wait();
  }
  virtual void all_gather(const void* send, void* recv, size_t send_count, DType dtype) {
    all_gather_async(send, recv, send_count, dtype)->wait();
  }
  virtual void all_to_all_v(const void* send, const size_t* send_counts, const size_t* send_displs, void* recv,
                            const size_t* recv_counts, const size_t* recv_displs, DType dtype) {
    all_to_all_v_async(send, send_counts, send_displs, recv, recv_counts, recv_displs, dtype)->wait();
  }
  virtual void broadcast(void* data, size_t count, DType dtype, int root) {
    broadcast_async(data, count, dtype, root)->wait();
  }
  virtual void send(const void* data, size_t count, DType dtype, int dst, int tag) {
    send_async(data, count, dtype, dst, tag)->wait();
  }
  virtual void recv(void* data, size_t count, DType dtype, int src, int tag) {
    recv_async(data, count, dtype, src, tag)->wait();
  }

  // Node topology, collective over this group. split_node: the members that run on this rank's node,
  // as a group of their own (in rank order). detect_ranks_per_node: the ranks per node when every
  // node holds the same number of consecutive world ranks (mpirun's default mapping); otherwise it
  // warns and returns 1 (node-aware placement then treats every rank as its own node). A backend
  // without node information puts every member on one node.
  virtual std::unique_ptr<Communicator> split_node(const std::string& name) { return split(0, rank(), name); }
  virtual int detect_ranks_per_node() { return size(); }

  // The deadline (seconds) of waits that start from now on, and of groups split afterwards; a
  // backend without deadlines (local) reports 0 and ignores the setter. Lets one wait (the one for
  // rank 0's checkpoint write) run under a longer deadline than the collectives of a step.
  virtual double timeout_seconds() const { return 0; }
  virtual void set_timeout_seconds(double seconds) { (void)seconds; }

  CommStats& stats() { return stats_; }
  const CommStats& stats() const { return stats_; }

  // Traced steps (comm/comm_trace.h): borrowed, null (the default) records nothing. Attach and
  // detach on all members at the same point, with no operation in flight; detaching (or switching)
  // first flushes the pending exchanges into the old trace.
  void set_trace(CommTrace* trace) {
    if (trace_ && trace_ != trace) flush_trace();
    trace_ = trace;
  }
  CommTrace* trace() const { return trace_; }
  // Completes the entry-time exchanges still in flight and records their events (a backend may
  // finish them lazily, off the critical path). Every member calls it at the same point.
  virtual void flush_trace() {}

 protected:
  Communicator() = default;
  CommStats stats_;
  CommTrace* trace_ = nullptr;
  Queue queue_;
};

}  // namespace moe4d
