// comm/local_communicator.cc — one-rank collectives: copies and no-ops (see the header).
#include "comm/local_communicator.h"

#include <cstring>

#include "comm/comm_trace.h"
#include "core/error.h"

namespace moe4d {
namespace {

// Operations of a one-rank group finish before the call returns.
class CompletedWork final : public Work {
 public:
  void wait() override {}
  bool test() override { return true; }
};

std::unique_ptr<Work> completed() { return std::make_unique<CompletedWork>(); }

void copy_if_distinct(void* dst, const void* src, size_t bytes) {
  if (dst != src && bytes > 0) std::memmove(dst, src, bytes);
}

}  // namespace

LocalCommunicator::LocalCommunicator(std::string name, int world_rank)
    : name_(std::move(name)), world_ranks_{world_rank} {}

void LocalCommunicator::count_call(CommOp op, size_t bytes) {
  stats_[op].calls += 1;
  stats_[op].bytes += static_cast<int64_t>(bytes);
  if (trace_) {  // one member: nothing to wait for, done on return
    const int64_t now = trace_clock_ns();
    trace_->add({.op = op, .label = comm_op_name(op), .bytes = int64_t(bytes), .launch_ns = now, .wait_ns = now,
                 .end_ns = now, .last_arrival_ns = now, .last_member = 0});
  }
}

std::unique_ptr<Work> LocalCommunicator::all_reduce_async(void* data, size_t count, DType dtype, ReduceOp op) {
  count_call(CommOp::kAllReduce, count * dtype_size(dtype));
  return completed();
}

std::unique_ptr<Work> LocalCommunicator::reduce_scatter_async(const void* send, void* recv, size_t recv_count,
                                                              DType dtype, ReduceOp op) {
  size_t bytes = recv_count * dtype_size(dtype);
  count_call(CommOp::kReduceScatter, bytes);
  copy_if_distinct(recv, send, bytes);
  return completed();
}

std::unique_ptr<Work> LocalCommunicator::all_gather_async(const void* send, void* recv, size_t send_count,
                                                          DType dtype) {
  size_t bytes = send_count * dtype_size(dtype);
  count_call(CommOp::kAllGather, bytes);
  copy_if_distinct(recv, send, bytes);
  return completed();
}

std::unique_ptr<Work> LocalCommunicator::all_to_all_v_async(const void* send, const size_t* send_counts,
                                                            const size_t* send_displs, void* recv,
                                                            const size_t* recv_counts, const size_t* recv_displs,
                                                            DType dtype) {
  if (send_counts[0] != recv_counts[0])
    fail("local backend: all_to_all_v on group {} sends {} elements to itself but expects to receive {}", name_,
         send_counts[0], recv_counts[0]);
  size_t esize = dtype_size(dtype);
  size_t bytes = send_counts[0] * esize;
  count_call(CommOp::kAllToAllV, bytes);
  copy_if_distinct(static_cast<char*>(recv) + recv_displs[0] * esize,
                   static_cast<const char*>(send) + send_displs[0] * esize, bytes);
  return completed();
}

std::unique_ptr<Work> LocalCommunicator::broadcast_async(void* data, size_t count, DType dtype, int root) {
  if (root != 0) fail("local backend: broadcast on group {} from root {}, but the group has only rank 0", name_, root);
  count_call(CommOp::kBroadcast, count * dtype_size(dtype));
  return completed();
}

std::unique_ptr<Work> LocalCommunicator::send_async(const void* data, size_t count, DType dtype, int dst, int tag) {
  fail("local backend: send on group {} to rank {}: a one-rank group has no peer to send to", name_, dst);
}

std::unique_ptr<Work> LocalCommunicator::recv_async(void* data, size_t count, DType dtype, int src, int tag) {
  fail("local backend: recv on group {} from rank {}: a one-rank group has no peer to receive from", name_, src);
}

void LocalCommunicator::barrier() { stats_[CommOp::kBarrier].calls += 1; }

std::unique_ptr<Communicator> LocalCommunicator::split(int color, int key, const std::string& name) {
  if (color < 0) return nullptr;
  return std::make_unique<LocalCommunicator>(name, world_ranks_[0]);
}

}  // namespace moe4d
