// Expert parallelism under mpirun: the EP exchange moves every row to the right place and back
// exactly (whole and sliced), and an MoE block spread over (TP, EP) — dropless, with capacity, with
// a router forced onto one expert — reproduces the single-rank block on the same micro-batches.
//
// Launched with 2 ranks (layouts tp1 x ep2, tp2 x ep1) and 4 ranks (tp2 x ep2, tp1 x ep4); the
// suites are named Size2 / Size4 and CTest runs each under its own mpirun.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "comm/mpi/mpi_communicator.h"
#include "config/config.h"
#include "moe_test_util.h"
#include "model/param_store.h"

namespace moe4d {
namespace {

struct Layout {
  int tp = 1, ep = 1;
  int chunks = 1;
  std::string name() const {
    return "tp" + std::to_string(tp) + "_ep" + std::to_string(ep) + "_chunks" + std::to_string(chunks);
  }
};

// The world split into tp x ep x (the rest as dp).
std::unique_ptr<ParallelContext> layout_context(const Layout& layout) {
  auto world = MpiCommunicator::world(CommOptions{.timeout_seconds = 60});
  ParallelConfig par;
  par.tensor_parallel = layout.tp;
  par.expert_parallel = layout.ep;
  par.data_parallel = world->size() / (layout.tp * layout.ep);
  par.collective_timeout = 60;
  return make_parallel_context(std::move(world), par, 0);
}

// ---------------------------------------------------------------------------------------------
// The exchange alone: rows in, rows out.

constexpr int kExperts = 8;
constexpr int kWidth = 5;

// Rows data replica `replica` routes to each global expert: uneven, with expert 1 empty everywhere,
// replica 0 sending nothing to the last expert and one expert taking a large share.
std::vector<int> route_counts(int replica) {
  std::vector<int> counts(kExperts);
  CounterRng rng(hash_combine(31, uint64_t(replica)));
  for (int g = 0; g < kExperts; ++g) counts[g] = int(rng.next_u64() % 7);
  counts[1] = 0;
  if (replica == 0) counts[kExperts - 1] = 0;
  counts[(replica + 3) % kExperts] += 23;
  return counts;
}
std::vector<int> offsets_of(const std::vector<int>& counts) {
  std::vector<int> off(counts.size() + 1, 0);
  for (size_t g = 0; g < counts.size(); ++g) off[g + 1] = off[g] + counts[g];
  return off;
}

// The expert layout of EP rank `holder` (in the EP group of dp coordinate `dp`), built from the
// token layouts `token_rows(replica)` of every source: local expert, then source, then row order.
template <typename TokenRows>
std::vector<float> expected_expert_layout(int holder, int dp, int ep, TokenRows token_rows) {
  const int el = kExperts / ep;
  std::vector<float> out;
  for (int e = 0; e < el; ++e) {
    const int g = holder * el + e;
    for (int s = 0; s < ep; ++s) {
      const int replica = dp * ep + s;
      const std::vector<int> off = offsets_of(route_counts(replica));
      const std::vector<float> rows = token_rows(replica);
      out.insert(out.end(), rows.begin() + size_t(off[g]) * kWidth, rows.begin() + size_t(off[g + 1]) * kWidth);
    }
  }
  return out;
}

// Index of the first difference, or -1: the moves must be exact, not merely close.
long first_mismatch(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return long(i);
  return -1;
}

class ExchangeRoundTrip : public ::testing::TestWithParam<Layout> {};

TEST_P(ExchangeRoundTrip, MovesRowsExactlyAndBack) {
  const Layout layout = GetParam();
  auto pc = layout_context(layout);
  const int ep = pc->ep_size(), me = pc->coord.ep, dp = pc->coord.dp, replica = pc->data_replica();
  ExpertExchange exchange(*pc->ep, kExperts, layout.chunks);
  auto token_rows = [](int r) {
    return test::normal_values(7, r, size_t(offsets_of(route_counts(r)).back()) * kWidth, 1.0f);
  };

  Arena memory, scratch;
  const std::vector<int> off = offsets_of(route_counts(replica));
  const int64_t calls_before = pc->ep->stats()[CommOp::kAllToAllV].calls;
  const ExpertExchangePlan plan = exchange.plan(off.data(), memory);
  ASSERT_EQ(plan.chunks, layout.chunks);
  ASSERT_EQ(plan.send_rows, off.back());

  // The slices cut every local expert's block into consecutive ranges, in order.
  int token_total = 0, expert_total = 0;
  for (int e = 0; e < plan.local_experts; ++e) {
    int at = plan.expert_offsets[e];
    for (int c = 0; c < plan.chunks; ++c) {
      EXPECT_EQ(plan.slices[c].expert_begin[e], at) << "expert " << e << " slice " << c;
      at = plan.slices[c].expert_end[e];
    }
    EXPECT_EQ(at, plan.expert_offsets[e + 1]) << "expert " << e;
  }
  for (int c = 0; c < plan.chunks; ++c) {
    token_total += plan.slices[c].token.total_rows;
    expert_total += plan.slices[c].expert.total_rows;
  }
  EXPECT_EQ(token_total, plan.send_rows);
  EXPECT_EQ(expert_total, plan.recv_rows);

  // Forward: token layout -> expert layout (checked against an independent construction) -> back.
  const std::vector<float> rows = token_rows(replica);
  const std::vector<float> want = expected_expert_layout(me, dp, ep, token_rows);
  ASSERT_EQ(size_t(plan.recv_rows) * kWidth, want.size());
  std::vector<float> at_experts(want.size(), NAN), back(rows.size(), NAN);
  exchange.dispatch(rows.data(), at_experts.data(), kWidth, plan, scratch);
  EXPECT_EQ(first_mismatch(at_experts, want), -1) << "dispatch misplaced a row";
  exchange.combine(at_experts.data(), back.data(), kWidth, plan, scratch);
  EXPECT_EQ(first_mismatch(back, rows), -1) << "combine did not return the input";

  // Backward moves: a gradient of the expert outputs goes back to the tokens by combine and to the
  // experts again by dispatch. Each holder's gradient is keyed by its replica, so the expected token
  // layout can be built here: my block of expert g sits in holder g / el's layout after the blocks of
  // sources before me.
  auto expert_grad = [&](int holder) {
    return test::normal_values(8, dp * ep + holder, expected_expert_layout(holder, dp, ep, token_rows).size(), 1.0f);
  };
  const std::vector<float> grad = expert_grad(me);
  std::vector<float> want_tokens;
  const int el = kExperts / ep;
  for (int g = 0; g < kExperts; ++g) {
    const int holder = g / el, e = g % el;
    const std::vector<float> holder_grad = expert_grad(holder);
    size_t row = 0;
    for (int ge = 0; ge < e; ++ge)
      for (int s = 0; s < ep; ++s) row += size_t(route_counts(dp * ep + s)[holder * el + ge]);
    for (int s = 0; s < me; ++s) row += size_t(route_counts(dp * ep + s)[g]);
    want_tokens.insert(want_tokens.end(), holder_grad.begin() + row * kWidth,
                       holder_grad.begin() + (row + size_t(route_counts(replica)[g])) * kWidth);
  }
  std::vector<float> grad_tokens(rows.size(), NAN), grad_back(grad.size(), NAN);
  exchange.combine(grad.data(), grad_tokens.data(), kWidth, plan, scratch);
  EXPECT_EQ(first_mismatch(grad_tokens, want_tokens), -1) << "combine misplaced a gradient row";
  exchange.dispatch(grad_tokens.data(), grad_back.data(), kWidth, plan, scratch);
  EXPECT_EQ(first_mismatch(grad_back, grad), -1) << "dispatch did not return the gradient";

  // Every rank issued one all_to_all_v per slice and move, whatever it had to send.
  EXPECT_EQ(pc->ep->stats()[CommOp::kAllToAllV].calls - calls_before, 4 * layout.chunks);
}

// ---------------------------------------------------------------------------------------------
// The whole block against the single-rank block.

struct BlockCase {
  Layout layout;
  std::optional<double> capacity_factor;
  RecomputeGranularity recompute = RecomputeGranularity::kNone;
  std::string name() const {
    std::string n = layout.name() + (capacity_factor ? "_capacity" : "_dropless");
    if (recompute == RecomputeGranularity::kSelective) n += "_selective";
    return n;
  }
};

struct BlockRun {
  std::vector<float> out, dx;
  MoeLayerStats stats;
};

// Largest |a - b| / max(1, |b|) over a parameter's shard, against the full reference tensor.
double shard_error(const ParamInfo& info, const float* shard, const float* full) {
  double worst = 0;
  for_each_shard_element(info, [&](int64_t local, int64_t global) {
    worst = std::max(worst, std::abs(double(shard[local]) - full[global]) / std::max(1.0, std::abs(double(full[global]))));
  });
  return worst;
}

// Runs the block on this rank's replica and, in-process, the single-rank block on every replica (the
// micro-batches of a step); compares output, input gradient, parameter gradients, routing statistics.
// `bias`: the router's selection bias, set on both. Returns the parallel run's statistics.
MoeLayerStats expect_block_matches_single_rank(ParallelContext& pc, const ModelConfig& cfg, int chunks,
                                               RecomputeGranularity recompute, const std::vector<float>& bias = {}) {
  const int replicas = pc.dp_size() * pc.ep_size(), replica = pc.data_replica(), batch = 2;
  const int tokens = batch * cfg.seq_length;
  const float scale = 1.0f / float(replicas);
  ModelConfig sliced = cfg;
  sliced.moe.a2a_chunks = chunks;

  test::MoeLayer parallel(sliced, pc);
  if (!bias.empty()) parallel.block.router_bias() = bias;
  BlockRun run;
  run.out = parallel.run(test::moe_batch(cfg, replica, tokens), batch, &run.dx, scale, recompute);
  run.stats = parallel.stats[0];

  auto local = make_single_rank_context();
  test::MoeLayer single(cfg, *local);
  if (!bias.empty()) single.block.router_bias() = bias;
  BlockRun ref;
  for (int q = 0; q < replicas; ++q) {
    single.reset_stats();
    std::vector<float> dx;
    std::vector<float> out = single.run(test::moe_batch(cfg, q, tokens), batch, &dx, scale);
    if (q == replica) ref = {std::move(out), std::move(dx), single.stats[0]};
  }

  double out_err = 0, dx_err = 0;
  for (size_t i = 0; i < ref.out.size(); ++i) {
    out_err = std::max(out_err, double(std::abs(run.out[i] - ref.out[i])));
    dx_err = std::max(dx_err, double(std::abs(run.dx[i] - ref.dx[i])));
  }
  EXPECT_LE(out_err, 1e-5) << "block output";
  EXPECT_LE(dx_err, 1e-5) << "input gradient";
  // Routing is computed per token from replicated parameters: statistics agree exactly.
  EXPECT_EQ(run.stats.aux_loss, ref.stats.aux_loss);
  EXPECT_EQ(run.stats.z_loss, ref.stats.z_loss);
  EXPECT_EQ(run.stats.tokens_per_expert, ref.stats.tokens_per_expert);
  EXPECT_EQ(run.stats.dropped_slots, ref.stats.dropped_slots);

  // Dense gradients are per-replica partial sums until the DP x EP reduction; experts are whole.
  for (int id = 0; id < parallel.params.size(); ++id) {
    const ParamInfo& info = parallel.params.info(id);
    if (info.group == ParamGroup::kDense) pc.dp_ep->all_reduce(parallel.params.grad(id), size_t(info.numel()));
    const int ref_id = single.params.find(info.name);
    EXPECT_LE(shard_error(info, parallel.params.grad(id), single.params.grad(ref_id)), 1e-5) << info.name;
  }
  return run.stats;
}

class BlockEquivalence : public ::testing::TestWithParam<BlockCase> {};

TEST_P(BlockEquivalence, ReproducesSingleRankBlock) {
  const BlockCase c = GetParam();
  auto pc = layout_context(c.layout);
  ModelConfig cfg = test::moe_test_config();
  cfg.moe.capacity_factor = c.capacity_factor;
  const MoeLayerStats stats = expect_block_matches_single_rank(*pc, cfg, c.layout.chunks, c.recompute);
  if (c.capacity_factor) {
    EXPECT_GT(stats.dropped_slots, 0) << "the capacity should bind in this case";
  }
}

// Slicing changes when rows travel, not what any expert computes: each expert sees the same rows in
// the same order, so the same layout with 1 and with `chunks` slices agrees to float rounding (the
// per-slice GEMMs have fewer rows, and OpenBLAS picks its micro-kernels by shape, so the last bit of
// a row may differ; weight gradients are one GEMM per expert either way). The micro-batch (256
// tokens, ~64 rows per expert and source) is large enough for every slice of every expert to hold rows.
class SlicingInvariance : public ::testing::TestWithParam<Layout> {};

double max_relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    worst = std::max(worst, std::abs(double(a[i]) - b[i]) / std::max(1.0, std::abs(double(b[i]))));
  return worst;
}

TEST_P(SlicingInvariance, SlicedRunMatchesUnsliced) {
  const Layout layout = GetParam();
  auto pc = layout_context(layout);
  const int batch = 16;
  struct Result {
    std::vector<float> out, dx, grads;
  };
  auto run = [&](int chunks) {
    ModelConfig cfg = test::moe_test_config();
    cfg.moe.a2a_chunks = chunks;
    test::MoeLayer layer(cfg, *pc);
    Result r;
    r.out = layer.run(test::moe_batch(cfg, pc->data_replica(), batch * cfg.seq_length), batch, &r.dx);
    for (int id = 0; id < layer.params.size(); ++id)
      r.grads.insert(r.grads.end(), layer.params.grad(id), layer.params.grad(id) + layer.params.info(id).numel());
    return r;
  };
  const Result whole = run(1), sliced = run(layout.chunks);
  EXPECT_LE(max_relative_difference(sliced.out, whole.out), 2e-6) << "output";
  EXPECT_LE(max_relative_difference(sliced.dx, whole.dx), 2e-6) << "input gradient";
  EXPECT_LE(max_relative_difference(sliced.grads, whole.grads), 2e-6) << "parameter gradients";
}

// Every token to one expert (top-1 and a selection bias no router probability can overcome): all
// other experts, and all EP ranks but one, get no rows. Forward and backward must still complete on
// every rank and agree with the single-rank block; only the chosen expert gets a gradient.
class ForcedRouter : public ::testing::TestWithParam<Layout> {};

TEST_P(ForcedRouter, OneExpertTakesEverythingWithoutHanging) {
  const Layout layout = GetParam();
  auto pc = layout_context(layout);
  ModelConfig cfg = test::moe_test_config();
  cfg.moe.top_k = 1;
  for (int target : {0, kExperts - 1}) {
    std::vector<float> bias(kExperts, 0.0f);
    bias[target] = 1000.0f;
    const MoeLayerStats stats = expect_block_matches_single_rank(*pc, cfg, layout.chunks, RecomputeGranularity::kNone, bias);
    for (int e = 0; e < kExperts; ++e)
      EXPECT_EQ(stats.tokens_per_expert[e], e == target ? 2.0 * cfg.seq_length : 0.0) << "expert " << e;
  }
}

// Capacity per source rank: each EP rank's block drops exactly what the naive reference drops when
// it is given only that rank's tokens, and produces the naive output.
class SourceRankCapacity : public ::testing::TestWithParam<Layout> {};

TEST_P(SourceRankCapacity, MatchesNaiveReferencePerRank) {
  const Layout layout = GetParam();
  auto pc = layout_context(layout);
  ModelConfig cfg = test::moe_test_config();
  cfg.moe.capacity_factor = 0.8;
  cfg.moe.a2a_chunks = layout.chunks;
  const int batch = 2, tokens = batch * cfg.seq_length;
  test::MoeLayer parallel(cfg, *pc);
  const test::MoeBatch in = test::moe_batch(cfg, pc->data_replica(), tokens);
  const std::vector<float> out = parallel.run(in, batch, nullptr);

  auto local = make_single_rank_context();
  test::MoeLayer single(cfg, *local);
  int dropped = 0;
  const std::vector<double> want = test::naive_moe(single).forward(in.x, &dropped);
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(out[i] - want[i]));
  EXPECT_LE(worst, 1e-5);
  EXPECT_GT(dropped, 0);
  EXPECT_EQ(parallel.stats[0].dropped_slots, double(dropped));
}

const Layout kTwoRankLayouts[] = {{.tp = 1, .ep = 2, .chunks = 1}, {.tp = 1, .ep = 2, .chunks = 3},
                                  {.tp = 2, .ep = 1, .chunks = 1}, {.tp = 2, .ep = 1, .chunks = 3}};
const Layout kFourRankLayouts[] = {{.tp = 2, .ep = 2, .chunks = 1}, {.tp = 2, .ep = 2, .chunks = 3},
                                   {.tp = 1, .ep = 4, .chunks = 1}, {.tp = 1, .ep = 4, .chunks = 3}};

std::vector<BlockCase> block_cases(const Layout* layouts, size_t n) {
  std::vector<BlockCase> cases;
  for (size_t i = 0; i < n; ++i) {
    cases.push_back({layouts[i], std::nullopt});
    cases.push_back({layouts[i], 1.0});
  }
  cases.push_back({layouts[1], std::nullopt, RecomputeGranularity::kSelective});
  return cases;
}

auto layout_name = [](const ::testing::TestParamInfo<Layout>& info) { return info.param.name(); };
auto case_name = [](const ::testing::TestParamInfo<BlockCase>& info) { return info.param.name(); };

INSTANTIATE_TEST_SUITE_P(Size2, ExchangeRoundTrip, ::testing::ValuesIn(kTwoRankLayouts), layout_name);
INSTANTIATE_TEST_SUITE_P(Size4, ExchangeRoundTrip, ::testing::ValuesIn(kFourRankLayouts), layout_name);
INSTANTIATE_TEST_SUITE_P(Size2, BlockEquivalence, ::testing::ValuesIn(block_cases(kTwoRankLayouts, 4)), case_name);
INSTANTIATE_TEST_SUITE_P(Size4, BlockEquivalence, ::testing::ValuesIn(block_cases(kFourRankLayouts, 4)), case_name);
INSTANTIATE_TEST_SUITE_P(Size2, ForcedRouter,
                         ::testing::Values(Layout{.tp = 1, .ep = 2, .chunks = 1}, Layout{.tp = 1, .ep = 2, .chunks = 3}),
                         layout_name);
INSTANTIATE_TEST_SUITE_P(Size4, ForcedRouter,
                         ::testing::Values(Layout{.tp = 1, .ep = 4, .chunks = 3}, Layout{.tp = 2, .ep = 2, .chunks = 3}),
                         layout_name);
INSTANTIATE_TEST_SUITE_P(Size2, SlicingInvariance,
                         ::testing::Values(Layout{.tp = 1, .ep = 2, .chunks = 3}, Layout{.tp = 1, .ep = 2, .chunks = 7}),
                         layout_name);
INSTANTIATE_TEST_SUITE_P(Size4, SlicingInvariance,
                         ::testing::Values(Layout{.tp = 1, .ep = 4, .chunks = 4}, Layout{.tp = 2, .ep = 2, .chunks = 3}),
                         layout_name);
INSTANTIATE_TEST_SUITE_P(Size2, SourceRankCapacity,
                         ::testing::Values(Layout{.tp = 1, .ep = 2, .chunks = 1}, Layout{.tp = 1, .ep = 2, .chunks = 3}),
                         layout_name);

}  // namespace
}  // namespace moe4d
