// tests/plan/search_test.cc — search invariants: admitted layouts fit and are sorted, refusals are
// specific, and pruning never loses the best layout (checked against an exhaustive enumeration).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <regex>
#include <set>

#include "plan/cluster_presets.h"
#include "plan/model_presets.h"
#include "plan/plan_report.h"
#include "plan/search.h"
#include "plan_test_util.h"

namespace moe4d {
namespace {

PlanContext preset_context(const std::string& model, const std::string& cluster, int devices) {
  const ModelPreset preset = model_preset(model);
  return PlanContext{model, preset.model, preset.setup, cluster_with_devices(cluster_preset(cluster), devices)};
}

void check_invariants(const PlanContext& ctx, const SearchResult& r) {
  ASSERT_FALSE(r.ranked.empty());
  EXPECT_LE(r.admitted, r.candidates);
  EXPECT_GE(r.timed, r.admitted > 0 ? 1 : 0);
  LayoutEvaluator evaluator(ctx);
  for (size_t i = 0; i < r.ranked.size(); ++i) {
    const Evaluation& e = r.ranked[i];
    const std::string what = layout_to_string(e.layout);
    EXPECT_EQ(layout_problem(ctx, e.layout), "") << what;
    EXPECT_TRUE(e.fits) << what;
    EXPECT_LE(e.memory.total(), ctx.cluster.device.memory_bytes) << what;
    EXPECT_FALSE(e.placement.tp.crosses_nodes()) << what;
    if (i > 0) {
      EXPECT_LE(r.ranked[i - 1].time.step, e.time.step) << what;
    }
    // The search's numbers are the evaluator's.
    const Evaluation again = evaluator.evaluate(e.layout);
    EXPECT_NEAR(again.time.step, e.time.step, 1e-12 * e.time.step) << what;
    EXPECT_NEAR(again.memory.total(), e.memory.total(), 1e-6) << what;
  }
  const std::regex memory_reason(R"(needs \d+\.\d GiB of \d+ GiB \(least memory: zero \d, recompute \w+, mbs \d+, \w+\))");
  for (const RejectedLayout& j : r.rejected) {
    EXPECT_FALSE(j.reason.empty());
    if (j.reason.rfind("needs ", 0) == 0) {
      EXPECT_TRUE(std::regex_match(j.reason, memory_reason)) << j.reason;
    } else {
      const bool known = j.reason.find("does not divide") != std::string::npos ||
                         j.reason.rfind("TP group crosses nodes", 0) == 0 ||
                         j.reason.find("needs an MoE model") != std::string::npos ||
                         j.reason.find("global batch") != std::string::npos;
      EXPECT_TRUE(known) << j.reason;
    }
  }
}

TEST(Search, InvariantsOnTheArticlesCluster) {
  const PlanContext ctx = preset_context("moe-120b", "atlas-800t-a2", 64);
  const SearchResult r = search_layouts(ctx, SearchSpace{}, 40);
  check_invariants(ctx, r);
  EXPECT_EQ(r.factorizations, 84);  // ordered factorisations of 64 into 4 factors
  // dp1 ep1 tp16 pp4 cannot keep TP inside an 8-card node.
  bool found = false;
  for (const RejectedLayout& j : r.rejected)
    if (j.dp == 1 && j.ep == 1 && j.tp == 16 && j.pp == 4) {
      EXPECT_EQ(j.reason, "TP group crosses nodes: tp 16 > 8 devices per node");
      found = true;
    }
  EXPECT_TRUE(found);
}

TEST(Search, InvariantsOnDgxForMixtral) {
  const PlanContext ctx = preset_context("mixtral-8x7b", "dgx-h100", 16);
  check_invariants(ctx, search_layouts(ctx, SearchSpace{}, 30));
}

TEST(Search, TopOneIsTheHeadOfTopMany) {
  const PlanContext ctx = preset_context("mixtral-8x7b", "dgx-a100", 32);
  const SearchResult one = search_layouts(ctx, SearchSpace{}, 1);
  const SearchResult many = search_layouts(ctx, SearchSpace{}, 25);
  ASSERT_EQ(one.ranked.size(), 1u);
  EXPECT_EQ(layout_to_string(one.ranked[0].layout), layout_to_string(many.ranked[0].layout));
  EXPECT_EQ(one.admitted, many.admitted);
}

TEST(Search, RespectsTheSearchSpace) {
  const PlanContext ctx = preset_context("mixtral-8x7b", "dgx-h100", 16);
  SearchSpace space;
  space.zero_stages = {1};
  space.recompute = {RecomputeGranularity::kSelective, RecomputeGranularity::kFull};
  space.schedules = {PipelineSchedule::k1F1B};
  space.search_rank_orders = false;
  const SearchResult r = search_layouts(ctx, space, 50);
  ASSERT_FALSE(r.ranked.empty());
  for (const Evaluation& e : r.ranked) {
    EXPECT_EQ(e.layout.zero_stage, 1);
    EXPECT_NE(e.layout.recompute, RecomputeGranularity::kNone);
    EXPECT_EQ(e.layout.schedule, PipelineSchedule::k1F1B);
    EXPECT_EQ(e.layout.order, kDefaultRankOrder);
  }
}

// A model small enough to enumerate every layout of 8 devices without pruning.
PlanContext small_context(double memory_bytes) {
  ModelConfig m;
  m.vocab_size = 512;
  m.hidden_size = 64;
  m.num_layers = 4;
  m.num_heads = 4;
  m.ffn_hidden_size = 128;
  m.seq_length = 64;
  m.moe.num_experts = 4;
  m.moe.top_k = 2;
  TrainingSetup s = testing::tiny_setup(32);
  s.seq_length = 64;
  s.precision = Precision::kBF16;
  ClusterSpec c = testing::flat_cluster(2, 4, memory_bytes);
  return PlanContext{"small", m, s, c};
}

TEST(Search, PruningKeepsTheBestLayout) {
  const PlanContext ctx = small_context(2.0e6);
  const SearchSpace space;
  const SearchResult r = search_layouts(ctx, space, 1);
  // Exhaustive reference: every split, micro-batching, schedule, v, recompute, ZeRO stage, sequence
  // parallelism and order.
  LayoutEvaluator evaluator(ctx);
  double best = std::numeric_limits<double>::infinity();
  int fitting = 0;
  int too_big = 0;
  std::string best_layout;
  const int devices = 8;
  for (int dp = 1; dp <= devices; ++dp)
    for (int ep = 1; ep <= devices; ++ep)
      for (int tp = 1; tp <= devices; ++tp)
        for (int pp = 1; pp <= devices; ++pp) {
          if (dp * ep * tp * pp != devices) continue;
          for (int mbs = 1; mbs <= 32; ++mbs)
            for (int m = 1; m <= 32; ++m)
              for (PipelineSchedule schedule : space.schedules)
                for (int v : {1, 2, 4})
                  for (RecomputeGranularity rc : space.recompute)
                    for (int zero : space.zero_stages)
                      for (const bool sp : {false, true})
                      for (const RankOrder& order : candidate_rank_orders(true)) {
                        Layout l;
                        l.dp = dp, l.ep = ep, l.tp = tp, l.pp = pp, l.micro_batch_size = mbs, l.micro_batch_num = m;
                        l.schedule = schedule, l.virtual_stages = v, l.recompute = rc, l.zero_stage = zero, l.order = order;
                        l.sequence_parallel = sp;
                        if (sp && tp == 1) continue;  // sequence parallelism is searched only with TP
                        if (mbs > space.max_micro_batch_size || !layout_problem(ctx, l).empty()) continue;
                        const Evaluation e = evaluator.evaluate(l);
                        if (e.placement.tp.crosses_nodes()) continue;
                        if (!e.fits) {
                          ++too_big;
                          continue;
                        }
                        ++fitting;
                        if (e.time.step < best) best_layout = layout_to_string(l);
                        best = std::min(best, e.time.step);
                      }
        }
  ASSERT_GT(fitting, 0);
  ASSERT_GT(too_big, 0);  // the memory limit does prune
  ASSERT_EQ(r.ranked.size(), 1u);
  EXPECT_NEAR(r.ranked[0].time.step, best, 1e-12 * best)
      << layout_to_string(r.ranked[0].layout) << " vs " << best_layout;
}

TEST(Search, NothingFitsGivesEveryReason) {
  const PlanContext ctx = preset_context("deepseek-v3-like", "dgx-a100", 16);
  const SearchResult r = search_layouts(ctx, SearchSpace{}, 10);
  EXPECT_TRUE(r.ranked.empty());
  EXPECT_EQ(static_cast<int64_t>(r.rejected.size()), r.factorizations);
}

// Context parallelism is tried for long sequences (here from 64 tokens): every CP layout the search
// returns is one layout_problem accepts (cp divides dp x ep, 2 cp divides the sequence, the batch
// splits over the dense replicas) with its CP groups placed; below that length none is tried.
TEST(Search, TriesContextParallelismOnLongSequences) {
  PlanContext ctx = small_context(2.0e6);
  SearchSpace space;
  space.context_parallel_from = 64;
  const SearchResult r = search_layouts(ctx, space, 1 << 20);  // every fitting layout
  int with_cp = 0;
  for (const Evaluation& e : r.ranked) {
    EXPECT_EQ(layout_problem(ctx, e.layout), "") << layout_to_string(e.layout);
    if (e.layout.cp > 1) {
      ++with_cp;
      EXPECT_EQ(e.layout.data_replicas() % e.layout.cp, 0);
      EXPECT_EQ(e.layout.dense_replicas() * e.layout.micro_batch_size * e.layout.micro_batch_num, ctx.setup.global_batch);
      EXPECT_EQ(e.placement.cp.size, e.layout.cp);
    }
  }
  const SearchResult plain = search_layouts(ctx, SearchSpace{}, 50);
  EXPECT_GT(r.candidates, plain.candidates);
  for (const Evaluation& e : plain.ranked) EXPECT_EQ(e.layout.cp, 1);
  EXPECT_GT(with_cp, 0);
}

// The evaluator caches each layer's compute per (tp, ep, cp, micro-batch size, sequence parallelism):
// one evaluator used for many layouts, met in another order than the search's, gives exactly what a
// fresh one gives, and exactly the search's numbers.
TEST(Search, SharedEvaluatorEqualsFreshOnes) {
  const PlanContext ctx = small_context(2.0e6);
  SearchSpace space;
  space.context_parallel_from = 64;
  const SearchResult r = search_layouts(ctx, space, 1 << 20);
  LayoutEvaluator shared(ctx);
  std::set<std::array<int, 5>> keys;
  for (auto it = r.ranked.rbegin(); it != r.ranked.rend(); ++it) {
    const Layout& l = it->layout;
    keys.insert({l.tp, l.ep, l.cp, l.micro_batch_size, l.sequence_parallel ? 1 : 0});
    const Evaluation a = shared.evaluate(l);
    const Evaluation b = LayoutEvaluator(ctx).evaluate(l);
    const std::string what = layout_to_string(l);
    EXPECT_EQ(a.time.step, b.time.step) << what;
    EXPECT_EQ(a.time.compute, b.time.compute) << what;
    EXPECT_EQ(a.time.recompute, b.time.recompute) << what;
    EXPECT_EQ(a.time.communication(), b.time.communication()) << what;
    EXPECT_EQ(a.memory.total(), b.memory.total()) << what;
    EXPECT_EQ(it->time.step, b.time.step) << what;
  }
  EXPECT_GT(keys.size(), 8u);
}

}  // namespace
}  // namespace moe4d

namespace moe4d {
namespace {

// Where the EP group spans nodes the search times both expert dispatchers (the flat all-to-all and
// the node-aware one); where it does not, only the flat one. The node-aware move is priced by
// ep_exchange_seconds, which for a one-node EP group is the flat all-to-all.
TEST(Search, TimesTheHierarchicalDispatchWhereEpSpansNodes) {
  const PlanContext ctx = preset_context("moe-120b", "atlas-800t-a2", 64);
  const SearchResult r = search_layouts(ctx, SearchSpace{}, 400);
  check_invariants(ctx, r);
  int hierarchical = 0;
  for (const Evaluation& e : r.ranked) {
    if (e.layout.dispatcher != MoeDispatcher::kHierarchical) continue;
    ++hierarchical;
    EXPECT_TRUE(e.placement.ep.crosses_nodes()) << layout_to_string(e.layout);
  }
  EXPECT_GT(hierarchical, 0);
  Layout one_node = parse_layout("dp=8,ep=8,tp=1,pp=1", ctx.setup.global_batch, 64);
  const Placement place = compute_placement(one_node, ctx.cluster.devices_per_node);
  ASSERT_FALSE(place.ep.crosses_nodes());
  const double flat = ep_exchange_seconds(ctx.cluster, ctx.model, ctx.setup, one_node, place, 4096);
  one_node.dispatcher = MoeDispatcher::kHierarchical;
  EXPECT_EQ(ep_exchange_seconds(ctx.cluster, ctx.model, ctx.setup, one_node, place, 4096), flat);
}

// A top-8 model whose EP group spans 2 nodes: the node-aware dispatch sends a token across once
// instead of 4 times, is faster, and the report says so.
TEST(Search, HierarchicalDispatchExplainedForATopEightModel) {
  const PlanContext ctx = preset_context("deepseek-v3-like", "dgx-h100", 256);
  LayoutEvaluator evaluator(ctx);
  const Layout flat = parse_layout("dp=8,ep=16,tp=1,pp=2,mbs=3,recompute=full,zero=3", ctx.setup.global_batch, 256);
  Layout hier = flat;
  hier.dispatcher = MoeDispatcher::kHierarchical;
  const Evaluation a = evaluator.evaluate(flat), b = evaluator.evaluate(hier);
  ASSERT_TRUE(b.placement.ep.crosses_nodes());
  EXPECT_LT(b.time.ep_comm, a.time.ep_comm);
  EXPECT_LT(b.time.step, a.time.step);
  const std::string text = format_explain(ctx, b);
  EXPECT_NE(text.find("expert dispatch hierarchical: a token reaches 1.00 other nodes"), std::string::npos) << text;
  EXPECT_NE(text.find("sends it 4.00 times across nodes (k = 8)"), std::string::npos) << text;
}

}  // namespace
}  // namespace moe4d
