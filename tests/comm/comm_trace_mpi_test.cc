// tests/comm/comm_trace_mpi_test.cc — the traced entry-time exchange (comm/comm_trace.h) on 4 ranks:
// one rank sleeps 50 ms before a collective (blocking, async caller-polled, async on the progress
// thread) or before a send, and the blocked time of the others must be attributed to waiting for
// exactly that rank; the late rank itself waits for nobody. Clock offsets on one host are ~0.
#include <gtest/gtest.h>

#include <chrono>
#include <string_view>
#include <thread>
#include <vector>

#include "comm/clock_sync.h"
#include "comm/comm_trace.h"
#include "comm/mpi/mpi_communicator.h"

namespace moe4d {
namespace {

constexpr double kDelay = 0.050;
constexpr int kLate = 2;

std::unique_ptr<MpiCommunicator> make_world() {
  MpiOptions options;
  options.progress_min_bytes = 64 << 10;  // the large case below goes through the progress thread
  return MpiCommunicator::world(CommOptions{120.0}, options);
}

// After a barrier (the ranks leave it within a few ms of each other), the late rank sleeps.
void sleep_if(Communicator& world, bool late) {
  world.barrier();
  if (late) std::this_thread::sleep_for(std::chrono::duration<double>(kDelay));
}

// The last event of `trace` (after the traced barrier of sleep_if), checked against who was late.
void expect_skew(const CommTrace& trace, int rank, const char* label) {
  ASSERT_EQ(trace.events().size(), 2u) << label;
  // Events are recorded as their exchanges complete, which need not be the order of the operations.
  const bool barrier_first = std::string_view(trace.events()[0].label) == "barrier";
  EXPECT_STREQ(trace.events()[barrier_first ? 0 : 1].label, "barrier");
  const CommTraceEvent& e = trace.events()[barrier_first ? 1 : 0];
  EXPECT_STREQ(e.label, label);
  EXPECT_EQ(e.last_member, kLate) << label << " on rank " << rank;
  EXPECT_GE(e.end_ns, e.wait_ns);
  if (rank == kLate) {
    EXPECT_EQ(e.waited_seconds(), 0.0) << label << ": the late rank waits for nobody";
  } else {
    // Blocked for about the delay, most of it waiting (slack for a loaded machine's scheduling).
    EXPECT_GE(e.waited_seconds(), 0.6 * kDelay) << label << " on rank " << rank;
    EXPECT_LE(e.waited_seconds(), e.blocked_seconds() + 1e-9);
    EXPECT_GT(e.waited_seconds(), 0.5 * e.blocked_seconds()) << label << " on rank " << rank;
  }
}

TEST(CommTrace, ClockOffsetsOnOneHostAreWithinTheRoundTrip) {
  auto world = make_world();
  const ClockOffset c = estimate_clock_offset(*world);
  if (world->rank() == 0) {
    EXPECT_EQ(c.offset_ns, 0);
  } else {
    EXPECT_GT(c.round_trip_ns, 0);
    // Same steady clock; CycleClock's per-process calibration adds a few microseconds at most.
    EXPECT_LE(std::abs(c.offset_ns), c.round_trip_ns / 2 + 50000);
  }
}

TEST(CommTrace, LateRankIsWaitedForInEveryCollectiveForm) {
  auto world = make_world();
  ASSERT_EQ(world->size(), 4);
  const int rank = world->rank();
  const ClockOffset clock = estimate_clock_offset(*world);

  {  // blocking all_reduce (MPI_Allreduce)
    CommTrace trace(rank, clock.offset_ns);
    world->set_trace(&trace);
    double x = 1;
    sleep_if(*world, rank == kLate);
    world->all_reduce(&x, 1, DType::kF64, ReduceOp::kSum);
    world->set_trace(nullptr);
    EXPECT_EQ(x, 4.0);
    expect_skew(trace, rank, "all_reduce");
  }
  {  // async, small (polled by the caller)
    CommTrace trace(rank, clock.offset_ns);
    world->set_trace(&trace);
    std::vector<float> v(16, 1.0f);
    sleep_if(*world, rank == kLate);
    world->all_reduce_async(v.data(), v.size(), DType::kF32, ReduceOp::kSum)->wait();
    world->set_trace(nullptr);
    EXPECT_EQ(v[0], 4.0f);
    expect_skew(trace, rank, "all_reduce");
  }
  {  // async, large (handed to the progress thread), all_gather
    CommTrace trace(rank, clock.offset_ns);
    world->set_trace(&trace);
    std::vector<float> mine(32 << 10, float(rank)), all(4 * mine.size());
    sleep_if(*world, rank == kLate);
    world->all_gather_async(mine.data(), all.data(), mine.size(), DType::kF32)->wait();
    world->set_trace(nullptr);
    EXPECT_EQ(all[3 * mine.size()], 3.0f);
    expect_skew(trace, rank, "all_gather");
  }
  {  // untraced: nothing recorded, nothing exchanged
    CommTrace trace(rank, clock.offset_ns);
    double x = 1;
    world->all_reduce(&x, 1, DType::kF64, ReduceOp::kSum);
    EXPECT_TRUE(trace.events().empty());
  }
}

TEST(CommTrace, ReceiverWaitsForALateSenderAndTheFlowPairs) {
  auto world = make_world();
  const int rank = world->rank();
  const ClockOffset clock = estimate_clock_offset(*world);
  CommTrace trace(rank, clock.offset_ns);
  world->set_trace(&trace);
  std::vector<float> buffer(64, float(rank));
  if (rank > 1) world->barrier();
  if (rank == 0) {
    sleep_if(*world, true);
    world->send(buffer.data(), buffer.size(), DType::kF32, 1, 5);
  } else if (rank == 1) {
    world->barrier();
    world->recv_async(buffer.data(), buffer.size(), DType::kF32, 0, 5)->wait();
  }
  world->set_trace(nullptr);
  // Every rank traced the barrier; ranks 0 and 1 also their send / recv.
  ASSERT_EQ(trace.events().size(), rank > 1 ? 1u : 2u);
  const size_t p2p = std::string_view(trace.events()[0].label) == "barrier" ? 1 : 0;
  if (rank <= 1) {
    EXPECT_STREQ(trace.events()[1 - p2p].label, "barrier");
  }
  int64_t flow = rank == 0 ? trace.events()[p2p].flow_id : 0;
  world->broadcast(&flow, 1, DType::kI64, 0);
  if (rank > 1) return;
  const CommTraceEvent& e = trace.events()[p2p];
  EXPECT_STREQ(e.label, rank == 0 ? "send" : "recv");
  EXPECT_NE(e.flow_id, 0);
  EXPECT_EQ(e.flow_id, flow);
  EXPECT_EQ(e.peer, 1 - rank);
  if (rank == 1) {
    EXPECT_EQ(buffer[0], 0.0f);
    EXPECT_GE(e.waited_seconds(), 0.6 * kDelay);
  }
}

}  // namespace
}  // namespace moe4d
