// tests/comm/local_communicator_test.cc — the one-rank backend: copies, no-ops, errors, split, stats.
#include "comm/local_communicator.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"

namespace moe4d {
namespace {

TEST(LocalCommunicator, IdentityAndCollectives) {
  LocalCommunicator comm("tp[dp=0,ep=0,pp=0]", 3);
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.size(), 1);
  EXPECT_EQ(comm.world_ranks(), std::vector<int>{3});
  EXPECT_EQ(comm.name(), "tp[dp=0,ep=0,pp=0]");
  EXPECT_STREQ(comm.backend(), "local");
  EXPECT_EQ(comm.split_node("node")->size(), 1);  // no node information: one node
  EXPECT_EQ(comm.detect_ranks_per_node(), 1);

  std::vector<float> data = {1, 2, 3};
  comm.all_reduce(data.data(), data.size());
  EXPECT_EQ(data, (std::vector<float>{1, 2, 3}));

  std::vector<float> out(3, 0);
  comm.reduce_scatter(data.data(), out.data(), 3, DType::kF32);
  EXPECT_EQ(out, data);
  std::vector<int64_t> gathered(2, 0), piece = {7, 8};
  comm.all_gather(piece.data(), gathered.data(), 2, DType::kI64);
  EXPECT_EQ(gathered, piece);

  std::vector<float> send = {9, 1, 2, 3}, recv(5, 0);
  size_t send_count = 3, send_displ = 1, recv_count = 3, recv_displ = 2;
  comm.all_to_all_v(send.data(), &send_count, &send_displ, recv.data(), &recv_count, &recv_displ, DType::kF32);
  EXPECT_EQ(recv, (std::vector<float>{0, 0, 1, 2, 3}));

  auto work = comm.all_reduce_async(data.data(), 3, DType::kF32, ReduceOp::kMax);
  EXPECT_TRUE(work->test());
  work->wait();
  comm.broadcast(data.data(), 3, DType::kF32, 0);
  comm.barrier();

  EXPECT_EQ(comm.stats()[CommOp::kAllReduce].calls, 2);
  EXPECT_EQ(comm.stats()[CommOp::kAllReduce].bytes, 24);
  EXPECT_EQ(comm.stats()[CommOp::kAllToAllV].bytes, 12);
  EXPECT_EQ(comm.stats()[CommOp::kBarrier].calls, 1);
}

TEST(LocalCommunicator, ErrorsNameBackendAndOperation) {
  LocalCommunicator comm;
  float x = 0;
  try {
    comm.send(&x, 1, DType::kF32, 0, 0);
    FAIL() << "send to self must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("local backend: send on group world"), std::string::npos) << e.what();
  }
  EXPECT_THROW(comm.recv(&x, 1, DType::kF32, 0, 0), Error);
  EXPECT_THROW(comm.broadcast(&x, 1, DType::kF32, 1), Error);
  size_t two = 2, one = 1, zero = 0;
  EXPECT_THROW(comm.all_to_all_v(&x, &two, &zero, &x, &one, &zero, DType::kF32), Error);
}

TEST(LocalCommunicator, SplitReturnsLocalOrNull) {
  LocalCommunicator comm("world", 5);
  auto child = comm.split(0, 0, "dp[ep=0,tp=0,pp=0]");
  ASSERT_NE(child, nullptr);
  EXPECT_EQ(child->name(), "dp[ep=0,tp=0,pp=0]");
  EXPECT_EQ(child->world_ranks(), std::vector<int>{5});
  EXPECT_STREQ(child->backend(), "local");
  EXPECT_EQ(comm.split(-1, 0, "none"), nullptr);
}

TEST(CommStats, AddSumsEveryField) {
  CommStats a, b;
  a[CommOp::kAllGather] = {1, 10, 0.5, 0.25, 3, 7};
  b[CommOp::kAllGather] = {2, 5, 1.0, 0.5, 1, 4};
  b[CommOp::kBarrier].calls = 4;
  a.add(b);
  EXPECT_EQ(a[CommOp::kAllGather].calls, 3);
  EXPECT_EQ(a[CommOp::kAllGather].bytes, 15);
  EXPECT_DOUBLE_EQ(a[CommOp::kAllGather].busy_seconds, 1.5);
  EXPECT_DOUBLE_EQ(a[CommOp::kAllGather].exposed_seconds, 0.75);
  EXPECT_EQ(a[CommOp::kAllGather].bytes_intra_node, 4);
  EXPECT_EQ(a[CommOp::kAllGather].bytes_inter_node, 11);
  EXPECT_EQ(a[CommOp::kBarrier].calls, 4);
  a.clear();
  EXPECT_EQ(a[CommOp::kAllGather].calls, 0);
  EXPECT_STREQ(comm_op_name(CommOp::kAllToAllV), "all_to_all_v");
}

}  // namespace
}  // namespace moe4d
