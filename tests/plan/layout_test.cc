// tests/plan/layout_test.cc — `--layout` parsing, rank orders and placement against RankGrid.
#include <gtest/gtest.h>

#include <functional>

#include "core/error.h"
#include "plan/layout.h"
#include "plan/placement.h"

namespace moe4d {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Layout, ParsesEveryKey) {
  const Layout l = parse_layout("dp=2,ep=8,tp=4,pp=1,mb=16,schedule=1f1b,recompute=full,zero=1", 256, 64);
  EXPECT_EQ(l.dp, 2);
  EXPECT_EQ(l.ep, 8);
  EXPECT_EQ(l.tp, 4);
  EXPECT_EQ(l.pp, 1);
  EXPECT_EQ(l.micro_batch_num, 16);
  EXPECT_EQ(l.micro_batch_size, 1);  // 256 / (2 * 8 * 16)
  EXPECT_EQ(l.recompute, RecomputeGranularity::kFull);
  EXPECT_EQ(l.zero_stage, 1);
  EXPECT_EQ(l.order, kDefaultRankOrder);
  const Layout m = parse_layout("pp=4,tp=2,mbs=2,schedule=interleaved,order=tp-pp-dp-ep", 64, 8);
  EXPECT_EQ(m.dp, 1);
  EXPECT_EQ(m.micro_batch_num, 32);
  EXPECT_EQ(m.virtual_stages, 2);  // interleaved default
  EXPECT_EQ(rank_order_string(m.order), "tp-pp-dp-ep");
  EXPECT_EQ(parse_layout("tp=8", 8, 8).micro_batch_num, 8);  // neither mb nor mbs: mbs 1
}

TEST(Layout, StringRoundTrip) {
  const Layout l = parse_layout("dp=2,pp=2,mb=8,schedule=interleaved,v=4,recompute=selective,zero=2,order=tp-dp-ep-pp", 64, 4);
  const Layout back = parse_layout(layout_to_string(l), 64, 4);
  EXPECT_EQ(layout_to_string(back), layout_to_string(l));
  EXPECT_EQ(layout_to_string(l), "dp=2,ep=1,tp=1,pp=2,mbs=4,mb=8,schedule=interleaved,v=4,recompute=selective,zero=2,order=tp-dp-ep-pp");
}

TEST(Layout, SequenceParallelRoundTrips) {
  Layout l = parse_layout("tp=4,dp=2,sp=1", 16, 8);
  EXPECT_TRUE(l.sequence_parallel);
  EXPECT_EQ(layout_to_string(l), "dp=2,ep=1,tp=4,pp=1,mbs=1,mb=8,schedule=1f1b,recompute=none,zero=0,order=tp-ep-dp-pp,sp=1");
  EXPECT_EQ(layout_dims_string(l), "dp2 ep1 tp4 pp1 sp");
  EXPECT_TRUE(parse_layout(layout_to_string(l), 16, 8).sequence_parallel);
  EXPECT_FALSE(parse_layout("tp=4,dp=2,sp=0", 16, 8).sequence_parallel);
  ParallelConfig p;
  p.tensor_parallel = 4;
  p.sequence_parallel = true;
  EXPECT_TRUE(layout_from_parallel_config(p, 4, 4).sequence_parallel);
  EXPECT_TRUE(layout_to_parallel_config(l, ParallelConfig{}).sequence_parallel);
}

// cp= splits the sequences over cp of the dp x ep data replicas: the global batch is read by dp x ep / cp
// dense replicas; the string, the short form and parallel_config carry it.
TEST(Layout, ContextParallelRoundTrips) {
  const Layout l = parse_layout("dp=2,ep=2,tp=2,cp=2,mb=4", 16, 8);
  EXPECT_EQ(l.cp, 2);
  EXPECT_EQ(l.dense_replicas(), 2);
  EXPECT_EQ(l.micro_batch_size, 2);  // 16 / (2 dense replicas x 4 micro-batches)
  EXPECT_EQ(layout_to_string(l), "dp=2,ep=2,tp=2,pp=1,mbs=2,mb=4,schedule=1f1b,recompute=none,zero=0,order=tp-ep-dp-pp,cp=2");
  EXPECT_EQ(layout_dims_string(l), "dp2 ep2 tp2 pp1 cp2");
  EXPECT_EQ(parse_layout(layout_to_string(l), 16, 8).cp, 2);
  const ParallelConfig p = layout_to_parallel_config(l, ParallelConfig{});
  EXPECT_EQ(p.context_parallel, 2);
  EXPECT_EQ(layout_to_string(layout_from_parallel_config(p, 16, 8)), layout_to_string(l));
  EXPECT_EQ(error_of([] { parse_layout("dp=2,ep=1,cp=4", 16, 2); }),
            "--layout cp=4 does not divide dp 2 x ep 1 = 2 (context parallelism is carved out of the data replicas)");
  EXPECT_EQ(error_of([] { parse_layout("dp=4,cp=2", 3, 4); }),
            "global batch 3 is not divisible by the 2 data replicas (dp 4 x ep 1 / cp 2)");
  // CP groups are consecutive data replicas: with tp 2 first, cp 2 groups span 4 ranks of a node.
  const Placement place = compute_placement(l, 8);
  EXPECT_EQ(place.cp.size, 2);
  EXPECT_EQ(place.cp.nodes, 1);
  EXPECT_EQ(compute_placement(l, 2).cp.nodes, 2);
  EXPECT_NE(describe_placement(l, 8).find("cp groups: {0,2} {1,3} {4,6} {5,7}"), std::string::npos)
      << describe_placement(l, 8);
}

TEST(Layout, RefusesAMismatchWithTheArticlesMessage) {
  EXPECT_EQ(error_of([] { parse_layout("dp=4,tp=4,pp=3", 256, 64); }),
            "parallel size mismatch: dp 4 x ep 1 x tp 4 x pp 3 = 48, but 64 devices are available");
}

TEST(Layout, RefusesBadKeysAndValues) {
  EXPECT_EQ(error_of([] { parse_layout("dp=2,etp=2", 8, 4); }),
            "--layout: unknown key 'etp', expected dp, ep, tp, pp, cp, mb, mbs, schedule, v, recompute, zero, order, "
            "sp or dispatch");
  EXPECT_EQ(error_of([] { parse_layout("dp=2,ep=2,dispatch=deepep", 8, 4); }),
            "--layout dispatch=deepep: expected alltoall or hierarchical");
  EXPECT_EQ(error_of([] { parse_layout("dp=2,sp=2", 8, 4); }),
            "--layout sp=2: expected 0 or 1 (sequence parallelism off or on)");
  EXPECT_EQ(error_of([] { parse_layout("dp=two", 8, 2); }), "--layout dp=two: expected a positive integer");
  EXPECT_EQ(error_of([] { parse_layout("dp=2,zero=4", 8, 2); }), "--layout zero=4: expected 0, 1, 2 or 3");
  EXPECT_EQ(error_of([] { parse_layout("dp=2,schedule=zb", 8, 2); }),
            "--layout schedule=zb: expected gpipe, 1f1b or interleaved");
  EXPECT_EQ(error_of([] { parse_layout("dp=2,dp=2", 8, 2); }), "--layout: key dp given twice");
  EXPECT_EQ(error_of([] { parse_layout("dp=2,v=2", 8, 2); }), "--layout v=2: virtual stages need schedule=interleaved");
  EXPECT_EQ(error_of([] { parse_layout("dp=3", 8, 3); }),
            "global batch 8 is not divisible by the 3 data replicas (dp 3 x ep 1)");
  EXPECT_EQ(error_of([] { parse_layout("dp=2,mb=3", 8, 2); }),
            "--layout mb=3: 4 sequences per data replica (global batch 8 / 2 replicas) do not split into 3 micro-batches");
  EXPECT_EQ(error_of([] { parse_layout("dp=2,mb=2,mbs=1", 8, 2); }),
            "--layout mb=2 x mbs=1 = 2 sequences per data replica, but global batch 8 / 2 replicas = 4");
  EXPECT_EQ(error_of([] { parse_layout("order=tp-ep-dp", 8, 1); }),
            "rank order 'tp-ep-dp': expected each of tp, ep, dp, pp exactly once");
}

TEST(Layout, FromAndToParallelConfig) {
  ParallelConfig p;
  p.data_parallel = 2;
  p.expert_parallel = 8;
  p.tensor_parallel = 4;
  p.micro_batch_num = 16;
  p.recompute = RecomputeGranularity::kFull;
  p.zero_stage = 1;
  const Layout l = layout_from_parallel_config(p, 256, 64);
  EXPECT_EQ(layout_to_string(l), "dp=2,ep=8,tp=4,pp=1,mbs=1,mb=16,schedule=1f1b,recompute=full,zero=1,order=tp-ep-dp-pp");
  const ParallelConfig back = layout_to_parallel_config(l, ParallelConfig{});
  EXPECT_EQ(back.data_parallel, 2);
  EXPECT_EQ(back.expert_parallel, 8);
  EXPECT_EQ(back.tensor_parallel, 4);
  EXPECT_EQ(back.micro_batch_num, 16);
  EXPECT_EQ(back.recompute, RecomputeGranularity::kFull);
  EXPECT_EQ(back.zero_stage, 1);
  p.device_list = {1, 0};
  EXPECT_NE(error_of([&] { layout_from_parallel_config(p, 256, 64); }).find("parallel_config.device_list"),
            std::string::npos);
}

void expect_span(const GroupSpan& got, const GroupSpan& want, const std::string& what) {
  EXPECT_EQ(got.size, want.size) << what;
  EXPECT_EQ(got.nodes, want.nodes) << what;
  EXPECT_EQ(got.per_node, want.per_node) << what;
}

TEST(Placement, ArticlesLayoutKeepsTpInsideNodes) {
  // dp2 ep8 tp4 on 8-card nodes, tp-ep-dp-pp: TP {0-3}, {4-7}; EP strides 4 over 4 nodes.
  const Layout l = parse_layout("dp=2,ep=8,tp=4", 256, 64);
  const Placement p = compute_placement(l, 8);
  expect_span(p.tp, {4, 1, 4}, "tp");
  expect_span(p.ep, {8, 4, 2}, "ep");
  expect_span(p.dp, {2, 2, 1}, "dp");
  expect_span(p.data, {16, 8, 2}, "dp x ep");
  // TP-last order puts TP across nodes.
  const Layout bad = parse_layout("dp=2,ep=8,tp=4,order=ep-dp-tp-pp", 256, 64);
  expect_span(compute_placement(bad, 8).tp, {4, 4, 1}, "tp last");
}

TEST(Placement, ClosedFormAndWalkAgreeWithRankGrid) {
  // Every split of these worlds, every rank order, a few node sizes (regular and irregular tilings).
  const std::vector<std::pair<int, int>> worlds = {{24, 8}, {24, 6}, {16, 8}, {12, 4}, {36, 6}, {64, 8}};
  for (const auto& [world, per_node] : worlds) {
    for (int dp = 1; dp <= world; ++dp) {
      if (world % dp) continue;
      for (int ep = 1; ep <= world / dp; ++ep) {
        if ((world / dp) % ep) continue;
        for (int tp = 1; tp <= world / dp / ep; ++tp) {
          if ((world / dp / ep) % tp) continue;
          Layout l;
          l.dp = dp;
          l.ep = ep;
          l.tp = tp;
          l.pp = world / dp / ep / tp;
          for (const char* order : {"tp-ep-dp-pp", "pp-dp-ep-tp", "tp-dp-pp-ep", "ep-tp-pp-dp"}) {
            l.order = parse_rank_order(order);
            const Placement p = compute_placement(l, per_node);
            const std::string what = fmt::format("{} {} on {}/node", layout_dims_string(l), order, per_node);
            expect_span(p.tp, group_span_by_grid(l, {ParallelDim::kTP}, per_node), what + " tp");
            expect_span(p.ep, group_span_by_grid(l, {ParallelDim::kEP}, per_node), what + " ep");
            expect_span(p.dp, group_span_by_grid(l, {ParallelDim::kDP}, per_node), what + " dp");
            expect_span(p.data, group_span_by_grid(l, {ParallelDim::kDP, ParallelDim::kEP}, per_node), what + " data");
            expect_span(p.pp, group_span_by_grid(l, {ParallelDim::kPP}, per_node), what + " pp");
          }
        }
      }
    }
  }
}

TEST(Placement, DescribeListsNodesAndGroups) {
  const std::string map = describe_placement(parse_layout("dp=2,tp=4", 8, 8), 4);
  EXPECT_NE(map.find("node 1:"), std::string::npos);
  EXPECT_NE(map.find("tp groups"), std::string::npos);
}

}  // namespace
}  // namespace moe4d

namespace moe4d {
namespace {

TEST(Layout, DispatcherRoundTrips) {
  const Layout l = parse_layout("dp=1,ep=4,dispatch=hierarchical", 8, 4);
  EXPECT_EQ(l.dispatcher, MoeDispatcher::kHierarchical);
  EXPECT_EQ(layout_dims_string(l), "dp1 ep4 tp1 pp1 hier");
  EXPECT_EQ(layout_to_string(parse_layout(layout_to_string(l), 8, 4)), layout_to_string(l));
  EXPECT_EQ(parse_layout("dp=1,ep=4", 8, 4).dispatcher, MoeDispatcher::kAllToAll);
  EXPECT_EQ(layout_to_string(parse_layout("dp=1,ep=4", 8, 4)).find("dispatch"), std::string::npos);
}

}  // namespace
}  // namespace moe4d
