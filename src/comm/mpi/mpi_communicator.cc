// comm/mpi/mpi_communicator.cc — Communicator over MPI: non-blocking operations with deadlines and a progress
// thread; blocking ones through MPI's blocking calls under the watchdog.
#include "comm/mpi/mpi_communicator.h"

#include <sched.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <mutex>
#include <thread>

#include "comm/mpi/mpi_arrival_exchange.h"
#include "comm/mpi/mpi_census.h"
#include "comm/mpi/mpi_progress_engine.h"
#include "comm/mpi/mpi_reduce_ops.h"
#include "core/error.h"
#include "core/cycle_clock.h"
#include "core/log.h"

namespace moe4d {

// Statistics stamp every call: the cheap clock (its time points are steady_clock's).
using Clock = CycleClock;

// How often a waiting rank answers census queries (and the watchdog checks blocking calls).
constexpr auto kCensusServeInterval = std::chrono::milliseconds(10);

struct MpiCommunicator::Shared {
  explicit Shared(const MpiOptions& options)
      : options(options), engine(options.progress_poll_interval), watchdog(kCensusServeInterval) {}
  MpiOptions options;
  MpiReduceOps ops;
  std::vector<std::string> hosts;  // by world rank (MPI_Get_processor_name), for deadline reports
  // What this process is waiting in, on any group (census answers of every group carry it, so a
  // rank blocked behind another is told apart from the one that never arrived). Set by the
  // waiting thread around each wait; the communicator outlives its own waits.
  std::mutex waiting_mutex;
  const MpiCommunicator* waiting_comm = nullptr;
  const char* waiting_label = "";
  Clock::time_point waiting_since;
  std::atomic<int> waiting_count{0};
  MpiProgressEngine engine;  // threads stop in reverse order of declaration
  MpiWatchdog watchdog;
};

// Marks this process as waiting in `label` on `comm` for the scope's lifetime.
class MpiCommunicator::WaitingMark {
 public:
  WaitingMark(MpiCommunicator* comm, const char* label, Clock::time_point since) : shared_(*comm->shared_), comm_(comm) {
    std::lock_guard<std::mutex> lock(shared_.waiting_mutex);
    shared_.waiting_comm = comm;
    shared_.waiting_label = label;
    shared_.waiting_since = since;
    shared_.waiting_count.fetch_add(1, std::memory_order_relaxed);
  }
  ~WaitingMark() {
    std::lock_guard<std::mutex> lock(shared_.waiting_mutex);
    if (shared_.waiting_comm == comm_) shared_.waiting_comm = nullptr;
    shared_.waiting_count.fetch_sub(1, std::memory_order_relaxed);
  }
  WaitingMark(const WaitingMark&) = delete;
  WaitingMark& operator=(const WaitingMark&) = delete;

 private:
  Shared& shared_;
  const MpiCommunicator* comm_;
};

namespace {

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Grace period of the census: long enough for members polling every few ms on a loaded machine,
// short next to the deadline itself.
double census_grace_seconds(double timeout) { return std::clamp(0.25 * timeout, 0.5, 10.0); }

}  // namespace

// The Work of one MPI operation. Either the waiting caller polls the request (small operations) or
// the progress engine owns it and the caller watches its ticket.
class MpiWork final : public Work {
 public:
  MpiWork(MpiCommunicator* comm, CommOp op, const char* label, MPI_Request request, int64_t seq, int peer,
          std::vector<int> owned_arrays, bool use_engine, std::unique_ptr<MpiArrivalExchange> exchange)
      : comm_(comm), op_(op), label_(label), seq_(seq), peer_(peer), started_(Clock::now()),
        owned_arrays_(std::move(owned_arrays)), exchange_(std::move(exchange)) {
    if (use_engine)
      ticket_ = comm_->shared_->engine.submit(request);
    else
      request_ = request;
  }
  ~MpiWork() override {
    if (!finished_) wait();
  }

  bool test() override {
    if (finished_) return true;
    if (ticket_) {
      if (!comm_->shared_->engine.is_done(*ticket_)) return false;
      finish(ticket_->completed_at);
      return true;
    }
    int flag = 0;
    comm_->check(MPI_Test(&request_, &flag, MPI_STATUS_IGNORE), "MPI_Test");
    if (flag) finish(Clock::now());
    return flag != 0;
  }

  void wait() override {
    if (finished_) return;
    auto entered = Clock::now();
    if (exchange_) exchange_->note_wait(entered.time_since_epoch().count());
    auto deadline = entered + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(comm_->options_.timeout_seconds));
    MpiCommunicator::WaitingMark mark(comm_, label_, entered);
    Clock::time_point completed_at = ticket_ ? wait_engine(entered, deadline) : wait_polling(entered, deadline);
    comm_->stats_[op_].exposed_seconds += seconds_between(entered, Clock::now());
    finish(completed_at);
  }

 private:
  // Takes the request back from the progress thread, then polls it here like any other.
  Clock::time_point wait_engine(Clock::time_point entered, Clock::time_point deadline) {
    comm_->shared_->engine.reclaim(*ticket_);
    if (ticket_->done) return ticket_->completed_at;
    request_ = ticket_->request;
    ticket_.reset();
    return wait_polling(entered, deadline);
  }

  // Back-off: spin for the first microseconds (small messages finish there), then yield, then
  // sleep briefly so that co-scheduled ranks on an oversubscribed core get to run.
  Clock::time_point wait_polling(Clock::time_point entered, Clock::time_point deadline) {
    auto next_serve = entered + kCensusServeInterval;
    while (true) {
      int flag = 0;
      comm_->check(MPI_Test(&request_, &flag, MPI_STATUS_IGNORE), "MPI_Test");
      auto now = Clock::now();
      if (flag) return now;
      auto waited = now - entered;
      if (waited < std::chrono::microseconds(20)) {
        continue;
      } else if (waited < std::chrono::milliseconds(1)) {
        sched_yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
      if (now >= next_serve) {
        comm_->census_->serve(comm_->census_answer());
        next_serve = now + kCensusServeInterval;
        if (now >= deadline) comm_->on_timeout(label_, seq_, peer_, seconds_between(entered, now));
      }
    }
  }

  // Busy time is the wall time during which at least one operation of this kind was in flight on
  // this communicator (the union of the intervals), not the sum over overlapping operations.
  void finish(Clock::time_point completed_at) {
    finished_ = true;
    Clock::time_point& frontier = comm_->busy_frontier_[static_cast<int>(op_)];
    const Clock::time_point from = std::max(started_, frontier);
    if (completed_at > from) comm_->stats_[op_].busy_seconds += seconds_between(from, completed_at);
    frontier = std::max(frontier, completed_at);
    if (exchange_ && !exchange_->finish(completed_at.time_since_epoch().count()))
      comm_->pending_exchanges_.push_back(std::move(exchange_));
  }

  MpiCommunicator* comm_;
  CommOp op_;
  const char* label_;
  int64_t seq_;
  int peer_;
  Clock::time_point started_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  std::shared_ptr<MpiProgressEngine::Ticket> ticket_;
  std::vector<int> owned_arrays_;  // MPI_Ialltoallv reads its count arrays until completion
  std::unique_ptr<MpiArrivalExchange> exchange_;  // traced steps only
  bool finished_ = false;
};

std::unique_ptr<MpiCommunicator> MpiCommunicator::world(const CommOptions& options, const MpiOptions& mpi) {
  select_nbc_all_reduce_algorithm(mpi.all_reduce_algorithm);  // best effort: other MPIs keep their own
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  auto shared = std::make_shared<Shared>(mpi);
  // Host names by world rank, once, so that a deadline report can say where each rank runs.
  int size = 1, length = 0;
  MPI_Comm_size(comm, &size);
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  MPI_Get_processor_name(name, &length);
  std::vector<char> names(static_cast<size_t>(size) * MPI_MAX_PROCESSOR_NAME);
  MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, comm);
  for (int r = 0; r < size; ++r) {
    const char* entry = names.data() + static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME;
    shared->hosts.emplace_back(entry, strnlen(entry, MPI_MAX_PROCESSOR_NAME));
  }
  return std::unique_ptr<MpiCommunicator>(new MpiCommunicator(comm, "world", options, std::move(shared)));
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, std::string name, const CommOptions& options,
                                 std::shared_ptr<Shared> shared)
    : comm_(comm), name_(std::move(name)), options_(options), shared_(std::move(shared)) {
  // Errors come back as codes so that they can be reported with the group and the operation.
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  MPI_Group group, world_group;
  MPI_Comm_group(comm_, &group);
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  std::vector<int> local(size_);
  for (int i = 0; i < size_; ++i) local[i] = i;
  world_ranks_.resize(size_);
  MPI_Group_translate_ranks(group, size_, local.data(), world_group, world_ranks_.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);
  same_node_.resize(size_);
  for (int i = 0; i < size_; ++i)
    same_node_[i] = shared_->hosts[world_ranks_[i]] == shared_->hosts[world_ranks_[rank_]];
  census_ = std::make_unique<MpiCensus>(comm_);
  MPI_Comm_dup(comm_, &trace_comm_);
  shared_->watchdog.add(this);
}

MpiCommunicator::~MpiCommunicator() {
  flush_trace();
  shared_->watchdog.remove(this);
  census_.reset();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && trace_comm_ != MPI_COMM_NULL) MPI_Comm_free(&trace_comm_);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiCommunicator::check(int rc, const char* call) const {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  log_line("ERROR", fmt::format("mpi backend: {} failed on group {}: {}", call, name_, std::string(text, length)));
  MPI_Abort(MPI_COMM_WORLD, 3);
}

int MpiCommunicator::to_count(size_t count, const char* op) const {
  if (count > static_cast<size_t>(INT_MAX))
    fail("mpi backend: {} on group {} with {} elements exceeds MPI's count limit of {} (INT_MAX); split the buffer",
         op, name_, count, INT_MAX);
  return static_cast<int>(count);
}

void MpiCommunicator::count_link(CommOp op, int peer, size_t bytes) {
  if (peer == rank_) return;
  (same_node_[peer] ? stats_[op].bytes_intra_node : stats_[op].bytes_inter_node) += static_cast<int64_t>(bytes);
}

std::unique_ptr<Work> MpiCommunicator::make_work(CommOp op, const char* label, size_t bytes, MPI_Request request,
                                                 int64_t seq, int peer, std::vector<int> owned_arrays, int tag) {
  stats_[op].calls += 1;
  stats_[op].bytes += static_cast<int64_t>(bytes);
  bool use_engine = shared_->options.progress_thread && bytes >= shared_->options.progress_min_bytes;
  return std::make_unique<MpiWork>(this, op, label, request, seq, peer, std::move(owned_arrays), use_engine,
                                   trace_ ? start_exchange(op, label, bytes, peer, tag) : nullptr);
}

std::unique_ptr<MpiArrivalExchange> MpiCommunicator::start_exchange(CommOp op, const char* label, size_t bytes,
                                                                    int peer, int tag) {
  using Kind = MpiArrivalExchange::Kind;
  const Kind kind = peer < 0 ? Kind::kCollective : (label[0] == 's' ? Kind::kSend : Kind::kRecv);
  return std::make_unique<MpiArrivalExchange>(*trace_, trace_comm_, size_, kind, op, label, bytes, peer, tag,
                                              trace_clock_ns());
}

CensusAnswer MpiCommunicator::census_answer() const {
  CensusAnswer answer;
  answer.issued = issued_.load();
  std::lock_guard<std::mutex> lock(shared_->waiting_mutex);
  if (shared_->waiting_comm) {
    answer.waiting_seconds = seconds_between(shared_->waiting_since, Clock::now());
    const std::string where = fmt::format("{} on group {}", shared_->waiting_label, shared_->waiting_comm->name_);
    where.copy(answer.waiting_in, sizeof(answer.waiting_in) - 1);
  }
  return answer;
}

void MpiCommunicator::on_timeout(const char* label, int64_t seq, int peer, double waited) {
  std::vector<LateMember> late;
  if (peer >= 0) {
    late.push_back(LateMember{peer, false, {}});  // point-to-point: the partner is the one missing
  } else {
    const double grace = census_grace_seconds(options_.timeout_seconds);
    late = census_->find_late(seq, census_answer(), grace);
    // Every late member is itself waiting on another group: the cause is further down the chain,
    // and the rank waiting on it will name it when its own deadline passes. Hold this report back
    // until then (answering census queries meanwhile), so the job's first report names the cause;
    // report this consequence only if nobody else has by then.
    double hold = -1;
    for (const LateMember& m : late) {
      if (!m.answered || m.answer.waiting_in[0] == '\0') {
        hold = -1;
        break;
      }
      hold = std::max(hold, options_.timeout_seconds - m.answer.waiting_seconds + 2 * grace + 1);
    }
    for (const Clock::time_point until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(hold));
         hold > 0 && Clock::now() < until;) {
      census_->serve(census_answer());
      shared_->watchdog.poll_others(this);
      std::this_thread::sleep_for(kCensusServeInterval);
    }
  }
  abort_on_collective_timeout(label, name_, world_ranks_, waited, late, shared_->hosts);
}

std::unique_ptr<Work> MpiCommunicator::all_reduce_async(void* data, size_t count, DType dtype, ReduceOp op) {
  int n = to_count(count, "all_reduce");
  MPI_Request request;
  check(MPI_Iallreduce(MPI_IN_PLACE, data, n, MpiReduceOps::datatype(dtype), shared_->ops.op(op, dtype), comm_,
                       &request),
        "MPI_Iallreduce");
  return make_work(CommOp::kAllReduce, "all_reduce", count * dtype_size(dtype), request, next_seq(), -1);
}

std::unique_ptr<Work> MpiCommunicator::reduce_scatter_async(const void* send, void* recv, size_t recv_count,
                                                            DType dtype, ReduceOp op) {
  int n = to_count(recv_count, "reduce_scatter");
  to_count(recv_count * size_, "reduce_scatter");
  MPI_Request request;
  const void* source = send == recv ? MPI_IN_PLACE : send;
  check(MPI_Ireduce_scatter_block(source, recv, n, MpiReduceOps::datatype(dtype), shared_->ops.op(op, dtype), comm_,
                                  &request),
        "MPI_Ireduce_scatter_block");
  return make_work(CommOp::kReduceScatter, "reduce_scatter", recv_count * size_ * dtype_size(dtype), request,
                   next_seq(), -1);
}

std::unique_ptr<Work> MpiCommunicator::all_gather_async(const void* send, void* recv, size_t send_count, DType dtype) {
  int n = to_count(send_count, "all_gather");
  to_count(send_count * size_, "all_gather");
  size_t bytes = send_count * dtype_size(dtype);
  const void* source = send == static_cast<char*>(recv) + rank_ * bytes ? MPI_IN_PLACE : send;
  MPI_Datatype type = MpiReduceOps::datatype(dtype);
  MPI_Request request;
  check(MPI_Iallgather(source, n, type, recv, n, type, comm_, &request), "MPI_Iallgather");
  return make_work(CommOp::kAllGather, "all_gather", bytes, request, next_seq(), -1);
}

std::unique_ptr<Work> MpiCommunicator::all_to_all_v_async(const void* send, const size_t* send_counts,
                                                          const size_t* send_displs, void* recv,
                                                          const size_t* recv_counts, const size_t* recv_displs,
                                                          DType dtype) {
  // Layout: [send counts | send displs | recv counts | recv displs], each size_ ints. The arrays
  // move into the Work (MPI_Ialltoallv reads them until completion), so each call allocates its own.
  std::vector<int> arrays(4 * static_cast<size_t>(size_));
  size_t sent = 0;
  for (int r = 0; r < size_; ++r) {
    arrays[r] = to_count(send_counts[r], "all_to_all_v");
    arrays[size_ + r] = to_count(send_displs[r], "all_to_all_v");
    arrays[2 * size_ + r] = to_count(recv_counts[r], "all_to_all_v");
    arrays[3 * size_ + r] = to_count(recv_displs[r], "all_to_all_v");
    sent += send_counts[r];
    count_link(CommOp::kAllToAllV, r, send_counts[r] * dtype_size(dtype));
  }
  MPI_Datatype type = MpiReduceOps::datatype(dtype);
  MPI_Request request;
  check(MPI_Ialltoallv(send, arrays.data(), arrays.data() + size_, type, recv, arrays.data() + 2 * size_,
                       arrays.data() + 3 * size_, type, comm_, &request),
        "MPI_Ialltoallv");
  return make_work(CommOp::kAllToAllV, "all_to_all_v", sent * dtype_size(dtype), request, next_seq(), -1,
                   std::move(arrays));
}

std::unique_ptr<Work> MpiCommunicator::broadcast_async(void* data, size_t count, DType dtype, int root) {
  if (root < 0 || root >= size_)
    fail("mpi backend: broadcast on group {} from root {}; expected a group rank in [0, {})", name_, root, size_);
  int n = to_count(count, "broadcast");
  MPI_Request request;
  check(MPI_Ibcast(data, n, MpiReduceOps::datatype(dtype), root, comm_, &request), "MPI_Ibcast");
  size_t bytes = rank_ == root ? count * dtype_size(dtype) : 0;
  return make_work(CommOp::kBroadcast, "broadcast", bytes, request, next_seq(), -1);
}

std::unique_ptr<Work> MpiCommunicator::send_async(const void* data, size_t count, DType dtype, int dst, int tag) {
  if (dst < 0 || dst >= size_ || dst == rank_)
    fail("mpi backend: send on group {} to rank {}; expected another group rank in [0, {})", name_, dst, size_);
  int n = to_count(count, "send");
  MPI_Request request;
  check(MPI_Isend(data, n, MpiReduceOps::datatype(dtype), dst, tag, comm_, &request), "MPI_Isend");
  count_link(CommOp::kSendRecv, dst, count * dtype_size(dtype));
  return make_work(CommOp::kSendRecv, "send", count * dtype_size(dtype), request, 0, dst, {}, tag);
}

std::unique_ptr<Work> MpiCommunicator::recv_async(void* data, size_t count, DType dtype, int src, int tag) {
  if (src < 0 || src >= size_ || src == rank_)
    fail("mpi backend: recv on group {} from rank {}; expected another group rank in [0, {})", name_, src, size_);
  int n = to_count(count, "recv");
  MPI_Request request;
  check(MPI_Irecv(data, n, MpiReduceOps::datatype(dtype), src, tag, comm_, &request), "MPI_Irecv");
  return make_work(CommOp::kSendRecv, "recv", 0, request, 0, src, {}, tag);
}

void MpiCommunicator::barrier() {
  MPI_Request request;
  check(MPI_Ibarrier(comm_, &request), "MPI_Ibarrier");
  make_work(CommOp::kBarrier, "barrier", 0, request, next_seq(), -1)->wait();
}

template <typename Call>
void MpiCommunicator::run_blocking(CommOp op, const char* label, size_t bytes, int peer, Call&& call, int tag) {
  std::unique_ptr<MpiArrivalExchange> exchange = trace_ ? start_exchange(op, label, bytes, peer, tag) : nullptr;
  stats_[op].calls += 1;
  stats_[op].bytes += static_cast<int64_t>(bytes);
  blocked_label_.store(label, std::memory_order_relaxed);
  blocked_seq_.store(peer < 0 ? next_seq() : 0, std::memory_order_relaxed);
  blocked_peer_.store(peer, std::memory_order_relaxed);
  const Clock::time_point start = Clock::now();
  blocked_since_ns_.store(start.time_since_epoch().count(), std::memory_order_release);
  if (exchange) exchange->note_wait(start.time_since_epoch().count());
  {
    WaitingMark mark(this, label, start);
    call();
  }
  blocked_since_ns_.store(0, std::memory_order_release);
  const Clock::time_point end = Clock::now();
  if (exchange && !exchange->finish(end.time_since_epoch().count())) pending_exchanges_.push_back(std::move(exchange));
  stats_[op].exposed_seconds += seconds_between(start, end);
  Clock::time_point& frontier = busy_frontier_[static_cast<int>(op)];
  stats_[op].busy_seconds += seconds_between(std::max(start, frontier), end);
  frontier = end;
}

void MpiCommunicator::watchdog_poll(Clock::time_point now) {
  const int64_t since_ns = blocked_since_ns_.load(std::memory_order_acquire);
  // While the process waits anywhere, every group answers census queries (a rank blocked here is
  // thereby told apart from one that never arrived); blocked in MPI on this group, it also enforces
  // the deadline.
  if (since_ns != 0 || shared_->waiting_count.load(std::memory_order_relaxed) > 0) census_->try_serve(census_answer());
  if (since_ns == 0) return;
  const double waited = seconds_between(Clock::time_point(Clock::duration(since_ns)), now);
  if (waited > options_.timeout_seconds)
    on_timeout(blocked_label_.load(), blocked_seq_.load(), blocked_peer_.load(), waited);
}

void MpiCommunicator::all_reduce(void* data, size_t count, DType dtype, ReduceOp op) {
  const int n = to_count(count, "all_reduce");
  run_blocking(CommOp::kAllReduce, "all_reduce", count * dtype_size(dtype), -1, [&] {
    check(MPI_Allreduce(MPI_IN_PLACE, data, n, MpiReduceOps::datatype(dtype), shared_->ops.op(op, dtype), comm_),
          "MPI_Allreduce");
  });
}

void MpiCommunicator::reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype, ReduceOp op) {
  const int n = to_count(recv_count, "reduce_scatter");
  to_count(recv_count * size_, "reduce_scatter");
  const void* source = send == recv ? MPI_IN_PLACE : send;
  run_blocking(CommOp::kReduceScatter, "reduce_scatter", recv_count * size_ * dtype_size(dtype), -1, [&] {
    check(MPI_Reduce_scatter_block(source, recv, n, MpiReduceOps::datatype(dtype), shared_->ops.op(op, dtype), comm_),
          "MPI_Reduce_scatter_block");
  });
}

void MpiCommunicator::all_gather(const void* send, void* recv, size_t send_count, DType dtype) {
  const int n = to_count(send_count, "all_gather");
  to_count(send_count * size_, "all_gather");
  const size_t bytes = send_count * dtype_size(dtype);
  const void* source = send == static_cast<char*>(recv) + rank_ * bytes ? MPI_IN_PLACE : send;
  const MPI_Datatype type = MpiReduceOps::datatype(dtype);
  run_blocking(CommOp::kAllGather, "all_gather", bytes, -1,
               [&] { check(MPI_Allgather(source, n, type, recv, n, type, comm_), "MPI_Allgather"); });
}

void MpiCommunicator::all_to_all_v(const void* send, const size_t* send_counts, const size_t* send_displs, void* recv,
                                   const size_t* recv_counts, const size_t* recv_displs, DType dtype) {
  std::vector<int>& arrays = alltoallv_arrays_;  // reused: no allocation per call
  arrays.resize(4 * static_cast<size_t>(size_));
  size_t sent = 0;
  for (int r = 0; r < size_; ++r) {
    arrays[r] = to_count(send_counts[r], "all_to_all_v");
    arrays[size_ + r] = to_count(send_displs[r], "all_to_all_v");
    arrays[2 * size_ + r] = to_count(recv_counts[r], "all_to_all_v");
    arrays[3 * size_ + r] = to_count(recv_displs[r], "all_to_all_v");
    sent += send_counts[r];
    count_link(CommOp::kAllToAllV, r, send_counts[r] * dtype_size(dtype));
  }
  const MPI_Datatype type = MpiReduceOps::datatype(dtype);
  run_blocking(CommOp::kAllToAllV, "all_to_all_v", sent * dtype_size(dtype), -1, [&] {
    check(MPI_Alltoallv(send, arrays.data(), arrays.data() + size_, type, recv, arrays.data() + 2 * size_,
                        arrays.data() + 3 * size_, type, comm_),
          "MPI_Alltoallv");
  });
}

void MpiCommunicator::broadcast(void* data, size_t count, DType dtype, int root) {
  if (root < 0 || root >= size_)
    fail("mpi backend: broadcast on group {} from root {}; expected a group rank in [0, {})", name_, root, size_);
  const int n = to_count(count, "broadcast");
  run_blocking(CommOp::kBroadcast, "broadcast", rank_ == root ? count * dtype_size(dtype) : 0, -1,
               [&] { check(MPI_Bcast(data, n, MpiReduceOps::datatype(dtype), root, comm_), "MPI_Bcast"); });
}

void MpiCommunicator::send(const void* data, size_t count, DType dtype, int dst, int tag) {
  if (dst < 0 || dst >= size_ || dst == rank_)
    fail("mpi backend: send on group {} to rank {}; expected another group rank in [0, {})", name_, dst, size_);
  const int n = to_count(count, "send");
  count_link(CommOp::kSendRecv, dst, count * dtype_size(dtype));
  run_blocking(
      CommOp::kSendRecv, "send", count * dtype_size(dtype), dst,
      [&] { check(MPI_Send(data, n, MpiReduceOps::datatype(dtype), dst, tag, comm_), "MPI_Send"); }, tag);
}

void MpiCommunicator::recv(void* data, size_t count, DType dtype, int src, int tag) {
  if (src < 0 || src >= size_ || src == rank_)
    fail("mpi backend: recv on group {} from rank {}; expected another group rank in [0, {})", name_, src, size_);
  const int n = to_count(count, "recv");
  run_blocking(CommOp::kSendRecv, "recv", 0, src, [&] {
    check(MPI_Recv(data, n, MpiReduceOps::datatype(dtype), src, tag, comm_, MPI_STATUS_IGNORE), "MPI_Recv");
  }, tag);
}

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key, const std::string& name) {
  // MPI_Comm_split has no non-blocking form; an Ibarrier under the deadline first makes sure every
  // member arrived, so a missing rank is reported instead of hanging the split.
  MPI_Request request;
  check(MPI_Ibarrier(comm_, &request), "MPI_Ibarrier");
  make_work(CommOp::kBarrier, "split", 0, request, next_seq(), -1)->wait();
  MPI_Comm child;
  check(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &child), "MPI_Comm_split");
  if (child == MPI_COMM_NULL) return nullptr;
  return std::unique_ptr<Communicator>(new MpiCommunicator(child, name, options_, shared_));
}

void MpiCommunicator::flush_trace() {
  for (std::unique_ptr<MpiArrivalExchange>& exchange : pending_exchanges_) exchange->complete();
  pending_exchanges_.clear();
}

std::unique_ptr<Communicator> MpiCommunicator::split_node(const std::string& name) {
  // Guarded like split(): every member must arrive before the blocking MPI_Comm_split_type.
  MPI_Request request;
  check(MPI_Ibarrier(comm_, &request), "MPI_Ibarrier");
  make_work(CommOp::kBarrier, "split_node", 0, request, next_seq(), -1)->wait();
  MPI_Comm child;
  check(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &child), "MPI_Comm_split_type");
  return std::unique_ptr<Communicator>(new MpiCommunicator(child, name, options_, shared_));
}

int MpiCommunicator::detect_ranks_per_node() {
  MPI_Comm node;
  check(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
  int node_size = 0;
  MPI_Comm_size(node, &node_size);
  int my_world = world_ranks_[rank_];
  int leader = 0;  // lowest world rank on this node
  check(MPI_Allreduce(&my_world, &leader, 1, MPI_INT, MPI_MIN, node), "MPI_Allreduce");
  MPI_Comm_free(&node);

  int mine[2] = {leader, node_size};
  std::vector<int> all(2 * static_cast<size_t>(size_));
  all_gather(mine, all.data(), 2, DType::kI32);
  int per_node = all[1];
  bool blocks = true;
  for (int r = 0; r < size_; ++r) {
    int first = all[2 * r], count = all[2 * r + 1];
    blocks = blocks && count == per_node && first % per_node == 0 && world_ranks_[r] >= first &&
             world_ranks_[r] < first + per_node;
  }
  if (blocks) return per_node;
  if (rank_ == 0)
    log_warn("ranks are not placed on nodes in equal blocks of consecutive ranks (mpirun --map-by node or uneven "
             "slots?); node-aware placement will treat every rank as its own node, so TP groups may cross nodes "
             "unnoticed and hierarchical reductions fall back to flat ones. Use mpirun --map-by slot with equal "
             "slots per host.");
  return 1;
}

}  // namespace moe4d
