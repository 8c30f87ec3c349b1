// tests/parallel/parallel_context_test.cc — every group of a ParallelContext built on real MPI ranks
// matches the rank grid, and communicates within exactly that group. Runs on 4 and 8 ranks.
#include "parallel/parallel_context.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "comm/mpi/mpi_communicator.h"
#include "config/config.h"
#include "core/error.h"

namespace moe4d {
namespace {

using D = ParallelDim;

int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

ParallelConfig layout(int dp, int ep, int tp, int pp, std::string order = "tp-ep-dp-pp") {
  ParallelConfig p;
  p.data_parallel = dp;
  p.expert_parallel = ep;
  p.tensor_parallel = tp;
  p.pipeline_parallel = pp;
  p.rank_order = std::move(order);
  p.collective_timeout = 45.0;
  return p;
}

// A group communicator must hold exactly the grid's group, in its order, and sum over it.
void expect_group(Communicator* comm, const ParallelContext& ctx, std::initializer_list<D> dims,
                  const std::string& name) {
  ASSERT_NE(comm, nullptr) << name;
  std::vector<int> members = ctx.grid.group(ctx.rank, dims);
  EXPECT_EQ(comm->world_ranks(), members) << name;
  EXPECT_EQ(comm->rank(), ctx.grid.group_rank(ctx.rank, dims)) << name;
  EXPECT_EQ(comm->name(), name);
  auto* mpi = dynamic_cast<MpiCommunicator*>(comm);
  ASSERT_NE(mpi, nullptr);
  EXPECT_EQ(mpi->options().timeout_seconds, 45.0) << "groups inherit parallel_config.collective_timeout";
  int64_t x = ctx.rank + 1, expected = 0;
  for (int r : members) expected += r + 1;
  comm->all_reduce(&x, 1, DType::kI64);
  EXPECT_EQ(x, expected) << name;
}

void check_context(const ParallelConfig& config) {
  auto ctx = make_parallel_context(MpiCommunicator::world(CommOptions{60.0}), config, 2);
  const GridCoord& c = ctx->coord;
  EXPECT_EQ(ctx->ranks_per_node, 2);
  EXPECT_EQ(ctx->grid.coord(ctx->rank), c);
  EXPECT_EQ(ctx->world->size(), world_size());
  expect_group(ctx->tp.get(), *ctx, {D::kTP}, fmt::format("tp[dp={},ep={},pp={}]", c.dp, c.ep, c.pp));
  expect_group(ctx->ep.get(), *ctx, {D::kEP}, fmt::format("ep[dp={},tp={},pp={}]", c.dp, c.tp, c.pp));
  expect_group(ctx->dp.get(), *ctx, {D::kDP}, fmt::format("dp[ep={},tp={},pp={}]", c.ep, c.tp, c.pp));
  expect_group(ctx->dp_ep.get(), *ctx, {D::kEP, D::kDP}, fmt::format("dp_ep[tp={},pp={}]", c.tp, c.pp));
  expect_group(ctx->pp.get(), *ctx, {D::kPP}, fmt::format("pp[dp={},ep={},tp={}]", c.dp, c.ep, c.tp));
  EXPECT_EQ(ctx->dp_ep->rank(), ctx->data_replica());

  bool on_end = ctx->pp_size() > 1 && (ctx->is_first_stage() || ctx->is_last_stage());
  ASSERT_EQ(ctx->embed != nullptr, on_end);
  if (on_end) {
    std::vector<int> stages = ctx->grid.group(ctx->rank, {D::kPP});
    EXPECT_EQ(ctx->embed->world_ranks(), (std::vector<int>{stages.front(), stages.back()}));
    EXPECT_EQ(ctx->embed->rank(), ctx->is_first_stage() ? 0 : 1);
    EXPECT_EQ(ctx->embed->name(), fmt::format("embed[dp={},ep={},tp={}]", c.dp, c.ep, c.tp));
  }
}

TEST(ParallelContext, FourRankLayouts) {
  if (world_size() != 4) GTEST_SKIP() << "needs 4 ranks";
  check_context(layout(2, 1, 2, 1));                  // DP2 x TP2
  check_context(layout(1, 2, 2, 1));                  // EP2 x TP2
  check_context(layout(1, 1, 2, 2));                  // TP2 x PP2
  check_context(layout(2, 1, 2, 1, "dp-tp-ep-pp"));   // TP groups across the simulated nodes
  ParallelConfig listed = layout(2, 1, 2, 1);
  listed.device_list = {3, 2, 1, 0};
  check_context(listed);
}

TEST(ParallelContext, EightRankLayouts) {
  if (world_size() != 8) GTEST_SKIP() << "needs 8 ranks";
  check_context(layout(1, 2, 2, 2));  // DP1 x EP2 x TP2 x PP2
  check_context(layout(2, 1, 2, 2));  // DP2 x TP2 x PP2
  check_context(layout(2, 2, 1, 2, "ep-dp-tp-pp"));
}

TEST(ParallelContext, MismatchIsAnError) {
  ParallelConfig wrong = layout(world_size(), 1, 1, 3);
  try {
    make_parallel_context(MpiCommunicator::world(CommOptions{60.0}), wrong, 2);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), fmt::format("parallel size mismatch: dp {} x ep 1 x tp 1 x pp 3 = {}, but {} ranks "
                                                 "were started",
                                                 world_size(), 3 * world_size(), world_size()));
  }
}

TEST(ParallelContext, DetectsRanksPerNode) {
  // One machine: every rank is on the same node.
  auto ctx = make_parallel_context(MpiCommunicator::world(CommOptions{60.0}), layout(world_size(), 1, 1, 1), 0);
  EXPECT_EQ(ctx->ranks_per_node, world_size());
}

TEST(ParallelContext, SingleRankContext) {
  auto ctx = make_single_rank_context();
  EXPECT_EQ(ctx->grid.world_size(), 1);
  EXPECT_STREQ(ctx->world->backend(), "local");
  EXPECT_EQ(ctx->tp->name(), "tp[dp=0,ep=0,pp=0]");
  EXPECT_EQ(ctx->dp_ep->name(), "dp_ep[tp=0,pp=0]");
  EXPECT_EQ(ctx->embed, nullptr);
  EXPECT_TRUE(ctx->is_first_stage() && ctx->is_last_stage());
  float x = 2.f;
  ctx->dp_ep->all_reduce(&x, 1);
  EXPECT_EQ(x, 2.f);
}

}  // namespace
}  // namespace moe4d
