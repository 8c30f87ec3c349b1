// tests/comm/mpi/mpi_communicator_test.cc — every MPI collective (blocking and async) against a naive
// reference computed locally, for each progress mode: caller-polled, default (large operations on
// the progress thread) and everything on the progress thread. Run with 2, 3 and 4 ranks.
#include "comm/mpi/mpi_communicator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <string>
#include <numeric>
#include <thread>
#include <vector>

#include "comm/mpi/mpi_reduce_ops.h"
#include "comm/mpi/mpi_tuning.h"
#include "core/error.h"

namespace moe4d {
namespace {

enum class Progress { kPolled, kDefault, kEngineOnly };

std::unique_ptr<MpiCommunicator> make_world(Progress mode) {
  MpiOptions options;
  if (mode == Progress::kPolled) options.progress_thread = false;
  if (mode == Progress::kEngineOnly) options.progress_min_bytes = 0;
  return MpiCommunicator::world(CommOptions{60.0}, options);
}

// Small integers in [-8, 8]: exact in every type and every summation order.
double value(int rank, size_t i) { return static_cast<double>(static_cast<int>((rank * 131 + i * 7) % 17) - 8); }

double reduce_reference(int size, size_t i, ReduceOp op, double (*f)(int, size_t)) {
  double acc = f(0, i);
  for (int r = 1; r < size; ++r) {
    double v = f(r, i);
    acc = op == ReduceOp::kSum ? acc + v : op == ReduceOp::kMax ? std::max(acc, v) : std::min(acc, v);
  }
  return acc;
}

double unsigned_value(int rank, size_t i) { return value(rank, i) + 8; }

// Elements of any DType stored as doubles <-> raw bytes.
struct TypedBuffer {
  DType dtype;
  std::vector<unsigned char> bytes;
  TypedBuffer(DType t, size_t n) : dtype(t), bytes(std::max<size_t>(n, 1) * dtype_size(t), 0xAB) {}
  void* data() { return bytes.data(); }
  void set(size_t i, double v) {
    switch (dtype) {
      case DType::kF32: reinterpret_cast<float*>(data())[i] = static_cast<float>(v); break;
      case DType::kF64: reinterpret_cast<double*>(data())[i] = v; break;
      case DType::kI32: reinterpret_cast<int32_t*>(data())[i] = static_cast<int32_t>(v); break;
      case DType::kI64: reinterpret_cast<int64_t*>(data())[i] = static_cast<int64_t>(v); break;
      case DType::kU8: reinterpret_cast<uint8_t*>(data())[i] = static_cast<uint8_t>(v); break;
      case DType::kBF16: reinterpret_cast<uint16_t*>(data())[i] = float_to_bf16(static_cast<float>(v)); break;
      case DType::kF16: reinterpret_cast<uint16_t*>(data())[i] = float_to_f16(static_cast<float>(v)); break;
      default: FAIL() << "dtype not covered";
    }
  }
  double get(size_t i) {
    switch (dtype) {
      case DType::kF32: return reinterpret_cast<float*>(data())[i];
      case DType::kF64: return reinterpret_cast<double*>(data())[i];
      case DType::kI32: return reinterpret_cast<int32_t*>(data())[i];
      case DType::kI64: return static_cast<double>(reinterpret_cast<int64_t*>(data())[i]);
      case DType::kU8: return reinterpret_cast<uint8_t*>(data())[i];
      case DType::kBF16: return bf16_to_float(reinterpret_cast<uint16_t*>(data())[i]);
      case DType::kF16: return f16_to_float(reinterpret_cast<uint16_t*>(data())[i]);
      default: return 0;
    }
  }
};

const DType kDTypes[] = {DType::kF32, DType::kF64, DType::kI32, DType::kI64, DType::kU8, DType::kBF16, DType::kF16};
const ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin};

class MpiCommTest : public ::testing::TestWithParam<Progress> {
 protected:
  void SetUp() override { comm_ = make_world(GetParam()); }
  std::unique_ptr<MpiCommunicator> comm_;
};

TEST_P(MpiCommTest, Identity) {
  int world_rank = 0, world_size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  EXPECT_EQ(comm_->rank(), world_rank);
  EXPECT_EQ(comm_->size(), world_size);
  std::vector<int> all(world_size);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(comm_->world_ranks(), all);
  EXPECT_EQ(comm_->name(), "world");
  EXPECT_STREQ(comm_->backend(), "mpi");
  EXPECT_EQ(comm_->detect_ranks_per_node(), world_size);  // one machine, consecutive ranks
  EXPECT_EQ(comm_->split_node("node")->size(), world_size);
}

TEST_P(MpiCommTest, AllReduceEveryDTypeAndOp) {
  const int n = comm_->size(), me = comm_->rank();
  for (DType dtype : kDTypes) {
    auto f = dtype == DType::kU8 ? unsigned_value : value;
    for (ReduceOp op : kOps) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{1000}, size_t{100000}}) {
        // Two operations in flight at once, waited on in reverse order.
        TypedBuffer a(dtype, count), b(dtype, count);
        for (size_t i = 0; i < count; ++i) {
          a.set(i, f(me, i));
          b.set(i, f(me, i + 1));
        }
        auto wa = comm_->all_reduce_async(a.data(), count, dtype, op);
        auto wb = comm_->all_reduce_async(b.data(), count, dtype, op);
        wb->wait();
        wa->wait();
        for (size_t i = 0; i < count; ++i) {
          ASSERT_EQ(a.get(i), reduce_reference(n, i, op, f)) << dtype_name(dtype) << " op " << int(op) << " i " << i;
          ASSERT_EQ(b.get(i), reduce_reference(n, i + 1, op, f)) << dtype_name(dtype) << " i " << i;
        }
      }
    }
  }
}

TEST_P(MpiCommTest, AllReduceLargeFloatBlocking) {
  // 4 MiB: above the default progress-thread threshold.
  const size_t count = size_t{1} << 20;
  std::vector<float> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(value(comm_->rank(), i));
  comm_->all_reduce(data.data(), count);
  for (size_t i = 0; i < count; i += 997) ASSERT_EQ(data[i], reduce_reference(comm_->size(), i, ReduceOp::kSum, value));
  const CommStats::Entry& stats = comm_->stats()[CommOp::kAllReduce];
  EXPECT_EQ(stats.calls, 1);
  EXPECT_EQ(stats.bytes, static_cast<int64_t>(count * sizeof(float)));
  EXPECT_GT(stats.busy_seconds, 0.0);
  EXPECT_GT(stats.exposed_seconds, 0.0);
}

TEST_P(MpiCommTest, ReduceScatter) {
  const int n = comm_->size(), me = comm_->rank();
  for (size_t block : {size_t{1}, size_t{33}, size_t{70000}}) {
    std::vector<float> send(block * n), recv(block, -1.f);
    for (size_t i = 0; i < send.size(); ++i) send[i] = static_cast<float>(value(me, i));
    comm_->reduce_scatter_async(send.data(), recv.data(), block, DType::kF32, ReduceOp::kSum)->wait();
    for (size_t i = 0; i < block; ++i)
      ASSERT_EQ(recv[i], reduce_reference(n, me * block + i, ReduceOp::kSum, value)) << "block " << block;
    // In place: the result lands in the first `block` elements.
    comm_->reduce_scatter(send.data(), send.data(), block, DType::kF32, ReduceOp::kMax);
    for (size_t i = 0; i < block; ++i) ASSERT_EQ(send[i], reduce_reference(n, me * block + i, ReduceOp::kMax, value));
  }
}

TEST_P(MpiCommTest, AllGather) {
  const int n = comm_->size(), me = comm_->rank();
  for (size_t count : {size_t{1}, size_t{17}, size_t{70000}}) {
    std::vector<double> send(count), recv(count * n, -1);
    for (size_t i = 0; i < count; ++i) send[i] = value(me, i);
    comm_->all_gather_async(send.data(), recv.data(), count, DType::kF64)->wait();
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(recv[r * count + i], value(r, i));
    // In place: this rank's block already sits at its position.
    std::vector<double> inplace(count * n, -1);
    std::copy(send.begin(), send.end(), inplace.begin() + me * count);
    comm_->all_gather(inplace.data() + me * count, inplace.data(), count, DType::kF64);
    EXPECT_EQ(inplace, recv);
  }
}

TEST_P(MpiCommTest, AllToAllVWithZeroCountsAndGaps) {
  const int n = comm_->size(), me = comm_->rank();
  auto count_between = [](int src, int dst) { return static_cast<size_t>((2 * src + dst) % 3); };  // zeros included
  auto element = [](int src, int dst, size_t k) { return static_cast<int32_t>(src * 1000 + dst * 100 + k); };
  std::vector<size_t> send_counts(n), send_displs(n), recv_counts(n), recv_displs(n);
  size_t send_total = 0, recv_total = 0;
  for (int j = 0; j < n; ++j) {
    send_counts[j] = count_between(me, j);
    send_displs[j] = send_total;
    send_total += send_counts[j] + 1;  // one unused element between blocks
    recv_counts[j] = count_between(j, me);
    recv_displs[j] = recv_total;
    recv_total += recv_counts[j] + 1;
  }
  std::vector<int32_t> send(send_total, -7), recv(recv_total, -9);
  for (int j = 0; j < n; ++j)
    for (size_t k = 0; k < send_counts[j]; ++k) send[send_displs[j] + k] = element(me, j, k);
  comm_->all_to_all_v_async(send.data(), send_counts.data(), send_displs.data(), recv.data(), recv_counts.data(),
                            recv_displs.data(), DType::kI32)
      ->wait();
  for (int j = 0; j < n; ++j) {
    for (size_t k = 0; k < recv_counts[j]; ++k) EXPECT_EQ(recv[recv_displs[j] + k], element(j, me, k));
    EXPECT_EQ(recv[recv_displs[j] + recv_counts[j]], -9) << "gap written";
  }
  size_t sent = std::accumulate(send_counts.begin(), send_counts.end(), size_t{0});
  EXPECT_EQ(comm_->stats()[CommOp::kAllToAllV].bytes, static_cast<int64_t>(sent * sizeof(int32_t)));
}

// The link-class counters against this rank's peers' host names (gethostname, gathered here): bytes
// to another rank of this host are intra-node, to another host inter-node, to itself neither. With
// MOE4D_TEST_HOSTS=N (the fake-node run below) the job must really span N hosts.
TEST_P(MpiCommTest, AllToAllVAndSendCountBytesPerLinkClass) {
  const int n = comm_->size(), me = comm_->rank();
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::vector<char> hosts(static_cast<size_t>(n) * sizeof(host));
  MPI_Allgather(host, sizeof(host), MPI_CHAR, hosts.data(), sizeof(host), MPI_CHAR, comm_->handle());
  auto host_of = [&](int r) { return std::string(hosts.data() + static_cast<size_t>(r) * sizeof(host)); };
  std::vector<std::string> distinct;
  for (int r = 0; r < n; ++r)
    if (std::find(distinct.begin(), distinct.end(), host_of(r)) == distinct.end()) distinct.push_back(host_of(r));
  if (const char* want = std::getenv("MOE4D_TEST_HOSTS")) {
    ASSERT_EQ(distinct.size(), std::stoul(want));
  }

  std::vector<size_t> send_counts(n), displs(n), recv_counts(n);
  int64_t intra = 0, inter = 0;
  for (int j = 0; j < n; ++j) {
    send_counts[j] = static_cast<size_t>(1 + me + 2 * j);
    recv_counts[j] = static_cast<size_t>(1 + j + 2 * me);
    if (j != me) (host_of(j) == host_of(me) ? intra : inter) += static_cast<int64_t>(send_counts[j] * 2);
  }
  std::vector<size_t> recv_displs(n);
  for (int j = 1; j < n; ++j) {
    displs[j] = displs[j - 1] + send_counts[j - 1];
    recv_displs[j] = recv_displs[j - 1] + recv_counts[j - 1];
  }
  std::vector<uint16_t> send(displs[n - 1] + send_counts[n - 1]), recv(recv_displs[n - 1] + recv_counts[n - 1]);
  comm_->all_to_all_v(send.data(), send_counts.data(), displs.data(), recv.data(), recv_counts.data(),
                      recv_displs.data(), DType::kBF16);
  comm_->all_to_all_v_async(send.data(), send_counts.data(), displs.data(), recv.data(), recv_counts.data(),
                            recv_displs.data(), DType::kBF16)
      ->wait();
  const CommStats::Entry& a2a = comm_->stats()[CommOp::kAllToAllV];
  EXPECT_EQ(a2a.bytes_intra_node, 2 * intra);
  EXPECT_EQ(a2a.bytes_inter_node, 2 * inter);

  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  std::vector<float> out(1000, 1.f), in(1000);
  auto r = comm_->recv_async(in.data(), in.size(), DType::kF32, prev, 3);
  comm_->send_async(out.data(), out.size(), DType::kF32, next, 3)->wait();
  r->wait();
  const CommStats::Entry& p2p = comm_->stats()[CommOp::kSendRecv];
  const bool same = host_of(next) == host_of(me);
  EXPECT_EQ(p2p.bytes_intra_node, same ? 4000 : 0);
  EXPECT_EQ(p2p.bytes_inter_node, same ? 0 : 4000);
  EXPECT_EQ(comm_->stats()[CommOp::kAllReduce].bytes_inter_node, 0);
}

TEST_P(MpiCommTest, BroadcastFromLastRank) {
  const int root = comm_->size() - 1;
  for (size_t count : {size_t{5}, size_t{100000}}) {
    std::vector<int64_t> data(count, -1);
    if (comm_->rank() == root)
      for (size_t i = 0; i < count; ++i) data[i] = static_cast<int64_t>(value(root, i)) * 3;
    comm_->broadcast(data.data(), count, DType::kI64, root);
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(data[i], static_cast<int64_t>(value(root, i)) * 3);
  }
  float x = 0;
  EXPECT_THROW(comm_->broadcast(&x, 1, DType::kF32, comm_->size()), Error);
}

TEST_P(MpiCommTest, SendRecvRing) {
  const int n = comm_->size(), me = comm_->rank();
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  for (size_t count : {size_t{3}, size_t{200000}}) {
    std::vector<float> out(count), in(count, -1.f);
    for (size_t i = 0; i < count; ++i) out[i] = static_cast<float>(me * 10 + static_cast<int>(i % 10));
    auto r = comm_->recv_async(in.data(), count, DType::kF32, prev, 7);
    auto s = comm_->send_async(out.data(), count, DType::kF32, next, 7);
    s->wait();
    r->wait();
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(in[i], static_cast<float>(prev * 10 + static_cast<int>(i % 10)));
  }
  // Blocking forms, opposite direction, ordered to avoid a cycle of blocking sends.
  int token = me, got = -1;
  if (me % 2 == 0) {
    comm_->send(&token, 1, DType::kI32, prev, 9);
    comm_->recv(&got, 1, DType::kI32, next, 9);
  } else {
    comm_->recv(&got, 1, DType::kI32, next, 9);
    comm_->send(&token, 1, DType::kI32, prev, 9);
  }
  EXPECT_EQ(got, next);
  EXPECT_THROW(comm_->send(&token, 1, DType::kI32, me, 0), Error);
}

TEST_P(MpiCommTest, SplitIntoReversedSubgroups) {
  const int n = comm_->size(), me = comm_->rank();
  // Even and odd ranks, ordered by descending world rank.
  auto sub = comm_->split(me % 2, -me, me % 2 == 0 ? "even" : "odd");
  ASSERT_NE(sub, nullptr);
  std::vector<int> expected;
  for (int r = n - 1; r >= 0; --r)
    if (r % 2 == me % 2) expected.push_back(r);
  EXPECT_EQ(sub->world_ranks(), expected);
  EXPECT_EQ(sub->world_ranks()[sub->rank()], me);
  EXPECT_EQ(sub->name(), me % 2 == 0 ? "even" : "odd");
  int64_t x = me + 1;
  sub->all_reduce(&x, 1, DType::kI64);
  int64_t sum = 0;
  for (int r : expected) sum += r + 1;
  EXPECT_EQ(x, sum);

  // Ranks passing a negative color get no communicator.
  auto only_zero = comm_->split(me == 0 ? 0 : -1, 0, "zero");
  EXPECT_EQ(only_zero != nullptr, me == 0);
  if (only_zero) {
    EXPECT_EQ(only_zero->size(), 1);
  }
}

TEST_P(MpiCommTest, TestPollsToCompletionAndBarrier) {
  std::vector<float> data(300000, 1.f);
  auto work = comm_->all_reduce_async(data.data(), data.size(), DType::kF32, ReduceOp::kSum);
  while (!work->test()) std::this_thread::yield();
  EXPECT_TRUE(work->test());
  work->wait();
  EXPECT_EQ(data[12345], static_cast<float>(comm_->size()));
  EXPECT_EQ(comm_->stats()[CommOp::kAllReduce].exposed_seconds, 0.0);  // never blocked in wait()
  comm_->barrier();
  EXPECT_EQ(comm_->stats()[CommOp::kBarrier].calls, 1);
}

TEST_P(MpiCommTest, CountsBeyondIntMaxAreErrors) {
  size_t too_many = static_cast<size_t>(INT_MAX) + 1;
  try {
    comm_->all_reduce_async(nullptr, too_many, DType::kU8, ReduceOp::kSum);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("all_reduce on group world with 2147483648 elements exceeds MPI's count limit"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(comm_->all_gather_async(nullptr, nullptr, too_many, DType::kU8), Error);
  EXPECT_THROW(comm_->send_async(nullptr, too_many, DType::kU8, (comm_->rank() + 1) % comm_->size(), 0), Error);
}

TEST(MpiTuning, SelectsOpenMpiAllReduceAlgorithm) {
  // Debian's OpenMPI has libnbc; the write must take effect there, and unknown names change nothing.
  EXPECT_TRUE(select_nbc_all_reduce_algorithm(NbcAllReduceAlgorithm::kRabenseifner));
  EXPECT_FALSE(select_nbc_all_reduce_algorithm(NbcAllReduceAlgorithm::kLibraryDefault));
  EXPECT_FALSE(set_mpi_control_variable("moe4d_no_such_variable", 1));
}

INSTANTIATE_TEST_SUITE_P(Modes, MpiCommTest,
                         ::testing::Values(Progress::kPolled, Progress::kDefault, Progress::kEngineOnly),
                         [](const ::testing::TestParamInfo<Progress>& info) {
                           switch (info.param) {
                             case Progress::kPolled: return std::string("Polled");
                             case Progress::kDefault: return std::string("Default");
                             case Progress::kEngineOnly: return std::string("EngineOnly");
                           }
                           return std::string("?");
                         });

}  // namespace
}  // namespace moe4d
