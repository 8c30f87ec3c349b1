// Pipeline schedules, stage partition and the micro-batch rule, without MPI: every schedule runs each
// (micro-batch, chunk) forward and backward exactly once, never deadlocks (simulated with the
// executor's semantics), holds the activations the theory says, and — with equal stages — idles the
// fraction the bubble formula predicts. Also: the example configs are valid layouts.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "config/config_loader.h"
#include "core/error.h"
#include "parallel/layout_check.h"
#include "train/feature_gate.h"
#include "train/pipeline_schedule.h"
#include "train/stage_partition.h"

namespace moe4d {
namespace {

using S = PipelineSchedule;

std::vector<std::vector<PipelineAction>> all_stages(S schedule, int p, int m, int v) {
  std::vector<std::vector<PipelineAction>> out;
  for (int s = 0; s < p; ++s) out.push_back(pipeline_actions(schedule, p, m, v, s));
  return out;
}

struct Case {
  S schedule;
  int p, m, v;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (int p : {1, 2, 3, 4, 8})
    for (int m : {1, 2, 3, 4, 8, 16}) {
      out.push_back({S::kGPipe, p, m, 1});
      out.push_back({S::k1F1B, p, m, 1});
      if (p >= 2 && m % p == 0)
        for (int v : {2, 3, 4}) out.push_back({S::kInterleaved, p, m, v});
    }
  return out;
}

std::string name(const Case& c) {
  return fmt::format("{} p{} m{} v{}", pipeline_schedule_name(c.schedule), c.p, c.m, c.v);
}

TEST(PipelineSchedule, EveryMicroBatchChunkRunsForwardThenBackwardOnce) {
  for (const Case& c : cases()) {
    for (int s = 0; s < c.p; ++s) {
      const auto actions = pipeline_actions(c.schedule, c.p, c.m, c.v, s);
      ASSERT_EQ(actions.size(), size_t(2 * c.m * c.v)) << name(c);
      std::map<std::pair<int, int>, int> state;  // (mb, chunk) -> 1 after forward, 2 after backward
      std::vector<int> last_forward(c.v, -1), last_backward(c.v, -1);
      for (const PipelineAction& a : actions) {
        ASSERT_TRUE(a.micro_batch >= 0 && a.micro_batch < c.m && a.chunk >= 0 && a.chunk < c.v) << name(c);
        int& st = state[{a.micro_batch, a.chunk}];
        if (a.op == PipelineOp::kForward) {
          EXPECT_EQ(st, 0) << name(c) << " stage " << s << ": forward twice";
          st = 1;
          // The executor's message tags rely on increasing micro-batch order per chunk.
          EXPECT_GT(a.micro_batch, last_forward[a.chunk]) << name(c);
          last_forward[a.chunk] = a.micro_batch;
        } else {
          EXPECT_EQ(st, 1) << name(c) << " stage " << s << ": backward before forward or twice";
          st = 2;
          EXPECT_GT(a.micro_batch, last_backward[a.chunk]) << name(c);
          last_backward[a.chunk] = a.micro_batch;
        }
      }
      EXPECT_EQ(state.size(), size_t(c.m * c.v)) << name(c);
    }
  }
}

TEST(PipelineSchedule, NoScheduleDeadlocks) {
  for (const Case& c : cases()) {
    const PipelineSimulation sim = simulate_pipeline(all_stages(c.schedule, c.p, c.m, c.v), c.v, 1.0, 2.0);
    EXPECT_TRUE(sim.completed) << name(c);
  }
}

TEST(PipelineSchedule, SimulationDetectsADeadlock) {
  // Stage 1 wants the backward of micro-batch 0 before anything reaches it: a cycle of waits.
  auto stages = all_stages(S::k1F1B, 2, 2, 1);
  std::swap(stages[0][0], stages[0][2]);  // stage 0: B0 first
  EXPECT_FALSE(simulate_pipeline(stages, 1, 1.0, 2.0).completed);
}

TEST(PipelineSchedule, ActivationsInFlightMatchTheory) {
  for (int p : {2, 4, 8})
    for (int m : {1, 2, 4, 8, 16})
      for (int s = 0; s < p; ++s) {
        EXPECT_EQ(max_in_flight(pipeline_actions(S::kGPipe, p, m, 1, s)), m);
        EXPECT_EQ(max_in_flight(pipeline_actions(S::k1F1B, p, m, 1, s)), std::min(p - s, m)) << p << " " << m;
      }
  // Interleaved (Megatron): 2 (p - s - 1) + (v - 1) p warm-up chunk-forwards plus one, capped at m v.
  for (int p : {2, 4})
    for (int v : {2, 4})
      for (int m : {p, 2 * p, 4 * p})
        for (int s = 0; s < p; ++s) {
          const int expected = m == p ? m * v : std::min(m * v, 2 * (p - s - 1) + (v - 1) * p + 1);
          EXPECT_EQ(max_in_flight(pipeline_actions(S::kInterleaved, p, m, v, s)), expected)
              << "p" << p << " m" << m << " v" << v << " s" << s;
        }
}

TEST(PipelineSchedule, EqualStagesIdleWhatTheFormulaSays) {
  for (int p : {2, 4})
    for (int m : {2, 4, 8, 16}) {
      const double formula = pipeline_bubble_formula(p, m, 1);
      EXPECT_NEAR(formula, double(p - 1) / (m + p - 1), 1e-12);
      for (S schedule : {S::kGPipe, S::k1F1B}) {
        const PipelineSimulation sim = simulate_pipeline(all_stages(schedule, p, m, 1), 1, 1.0, 2.0);
        ASSERT_TRUE(sim.completed);
        EXPECT_NEAR(sim.makespan, 3.0 * (m + p - 1), 1e-9) << pipeline_schedule_name(schedule) << p << m;
        EXPECT_NEAR(sim.bubble(), formula, 1e-9) << pipeline_schedule_name(schedule) << p << m;
      }
      if (m % p != 0 || m == p) continue;
      // Interleaved: chunks take 1/v of the stage time; the bubble shrinks to ((p-1)/v) / (m + (p-1)/v).
      for (int v : {2, 4}) {
        const PipelineSimulation sim = simulate_pipeline(all_stages(S::kInterleaved, p, m, v), v, 1.0 / v, 2.0 / v);
        ASSERT_TRUE(sim.completed);
        EXPECT_NEAR(sim.bubble(), pipeline_bubble_formula(p, m, v), 1e-9) << "p" << p << " m" << m << " v" << v;
        EXPECT_LT(sim.bubble(), formula);
      }
    }
}

TEST(PipelineSchedule, UnequalStagesFollowTheSlowestStage) {
  // Stage s takes (s + 1) x (1 forward + 2 backward): the step is m t_max + (sum t - t_max), the
  // planner's pipeline_time for 1F1B and GPipe.
  for (S schedule : {S::kGPipe, S::k1F1B})
    for (int p : {2, 3, 4})
      for (int m : {4, 8}) {
        auto duration = [](int s, const PipelineAction& a) {
          return (s + 1) * (a.op == PipelineOp::kForward ? 1.0 : 2.0);
        };
        const PipelineSimulation sim = simulate_pipeline(all_stages(schedule, p, m, 1), 1, duration);
        ASSERT_TRUE(sim.completed);
        const double t_max = 3.0 * p, t_sum = 3.0 * p * (p + 1) / 2;
        EXPECT_NEAR(sim.makespan, m * t_max + t_sum - t_max, 1e-9) << pipeline_schedule_name(schedule) << p << m;
        EXPECT_GT(sim.bubble(), pipeline_bubble_formula(p, m, 1));
      }
}

TEST(PipelineSchedule, OneStageIsThePlainLoop) {
  const auto actions = pipeline_actions(S::k1F1B, 1, 3, 1, 0);
  const std::vector<PipelineAction> expected = {{PipelineOp::kForward, 0, 0}, {PipelineOp::kBackward, 0, 0},
                                                {PipelineOp::kForward, 1, 0}, {PipelineOp::kBackward, 1, 0},
                                                {PipelineOp::kForward, 2, 0}, {PipelineOp::kBackward, 2, 0}};
  EXPECT_EQ(actions, expected);
  EXPECT_EQ(forward_only_actions(2, 2).size(), 4u);
}

ModelConfig model_with_layers(int layers) {
  ModelConfig m;
  m.num_layers = layers;
  return m;
}

TEST(StagePartition, EvenSplitPutsEmbeddingFirstAndHeadLast) {
  ParallelConfig p;
  p.pipeline_parallel = 4;
  const StagePartition part = partition_stages(model_with_layers(8), p);
  ASSERT_EQ(part.num_virtual_stages(), 4);
  for (int s = 0; s < 4; ++s) {
    const auto chunks = part.chunks_of(s);
    ASSERT_EQ(chunks.size(), 1u);
    EXPECT_EQ(chunks[0].first_layer, 2 * s);
    EXPECT_EQ(chunks[0].num_layers, 2);
    EXPECT_EQ(chunks[0].has_embedding, s == 0);
    EXPECT_EQ(chunks[0].has_head, s == 3);
  }
}

TEST(StagePartition, ExplicitStageLayersAreHonoured) {
  ParallelConfig p;
  p.pipeline_parallel = 3;
  p.stage_layers = {1, 4, 2};
  const StagePartition part = partition_stages(model_with_layers(7), p);
  EXPECT_EQ(part.chunks_of(0)[0].first_layer, 0);
  EXPECT_EQ(part.chunks_of(0)[0].num_layers, 1);
  EXPECT_EQ(part.chunks_of(1)[0].first_layer, 1);
  EXPECT_EQ(part.chunks_of(1)[0].num_layers, 4);
  EXPECT_EQ(part.chunks_of(2)[0].first_layer, 5);
  EXPECT_EQ(part.chunks_of(2)[0].num_layers, 2);
  EXPECT_TRUE(part.chunks_of(2)[0].has_head);
  p.stage_layers = {1, 4, 1};
  EXPECT_THROW(partition_stages(model_with_layers(7), p), Error);
}

TEST(StagePartition, InterleavedChunkCOfRankSIsVirtualStageCTimesPPlusS) {
  ParallelConfig p;
  p.pipeline_parallel = 2;
  p.pipeline_schedule = S::kInterleaved;
  p.virtual_pipeline = 2;
  const StagePartition part = partition_stages(model_with_layers(8), p);
  // Virtual stages 0..3 hold layers {0,1}, {2,3}, {4,5}, {6,7}; rank 0 holds 0 and 2, rank 1 holds 1 and 3.
  const auto r0 = part.chunks_of(0), r1 = part.chunks_of(1);
  ASSERT_EQ(r0.size(), 2u);
  EXPECT_EQ(r0[0].first_layer, 0);
  EXPECT_EQ(r0[1].first_layer, 4);
  EXPECT_EQ(r1[0].first_layer, 2);
  EXPECT_EQ(r1[1].first_layer, 6);
  EXPECT_TRUE(r0[0].has_embedding);
  EXPECT_FALSE(r0[1].has_embedding || r0[1].has_head || r1[0].has_head);
  EXPECT_TRUE(r1[1].has_head);
  p.virtual_pipeline = 3;
  EXPECT_THROW(partition_stages(model_with_layers(8), p), Error);
}

TEST(PipelineMicroBatches, FewerMicroBatchesThanStagesIsRefusedWithTheReason) {
  ParallelConfig p;
  p.pipeline_parallel = 4;
  p.micro_batch_num = 2;
  try {
    check_pipeline_micro_batches(p);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("micro_batch_num 2 is smaller than pipeline_parallel 4"), std::string::npos) << msg;
    EXPECT_NE(msg.find("(p-1)/(m+p-1) = 60%"), std::string::npos) << msg;
    EXPECT_NE(msg.find("micro_batch_num >= 4 x pipeline_parallel (16)"), std::string::npos) << msg;
  }
  p.micro_batch_num = 4;
  EXPECT_NO_THROW(check_pipeline_micro_batches(p));
  ASSERT_TRUE(pipeline_bubble_warning(p).has_value());
  EXPECT_NE(pipeline_bubble_warning(p)->find("43%"), std::string::npos) << *pipeline_bubble_warning(p);
  p.micro_batch_num = 16;
  EXPECT_FALSE(pipeline_bubble_warning(p).has_value());
  p.pipeline_parallel = 1;
  p.micro_batch_num = 1;
  EXPECT_NO_THROW(check_pipeline_micro_batches(p));
}

TEST(PipelineMicroBatches, FeatureGateAcceptsPipelinesAndNamesTheFile) {
  Config c;
  c.source = "x.yaml";
  c.parallel.pipeline_parallel = 2;
  c.parallel.micro_batch_num = 8;
  c.parallel.pipeline_schedule = S::kInterleaved;
  c.parallel.virtual_pipeline = 2;
  EXPECT_NO_THROW(check_training_support(c));
  c.parallel.micro_batch_num = 1;
  try {
    check_training_support(c);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("x.yaml: parallel_config.micro_batch_num 1 is smaller", 0), 0u) << e.what();
  }
}

// The example layouts of configs/: the articles' 64-card layout, a 4-D layout for 8 local ranks and
// the small Qwen3-MoE-style model (EP2 x TP2 + SP).
TEST(ExampleConfigs, AreValidTrainableLayouts) {
  for (const char* file : {"articles_64card.yaml", "fourd_8rank.yaml", "qwen3_moe_small.yaml"}) {
    const Config c = load_config(std::string(MOE4D_SOURCE_DIR) + "/configs/" + file);
    EXPECT_NO_THROW(validate_layout(c.model, c.parallel, c.train.global_batch_size, c.parallel.world_size())) << file;
    EXPECT_NO_THROW(check_training_support(c)) << file;
    EXPECT_NO_THROW(partition_stages(c.model, c.parallel)) << file;
  }
  const Config articles = load_config(std::string(MOE4D_SOURCE_DIR) + "/configs/articles_64card.yaml");
  EXPECT_EQ(articles.parallel.world_size(), 64);
  EXPECT_EQ(articles.parallel.data_parallel, 2);
  EXPECT_EQ(articles.parallel.expert_parallel, 8);
  EXPECT_EQ(articles.parallel.tensor_parallel, 4);
  EXPECT_EQ(articles.parallel.pipeline_parallel, 1);
  const Config fourd = load_config(std::string(MOE4D_SOURCE_DIR) + "/configs/fourd_8rank.yaml");
  EXPECT_EQ(fourd.parallel.world_size(), 8);
  EXPECT_GT(fourd.parallel.expert_parallel, 1);
  EXPECT_GT(fourd.parallel.tensor_parallel, 1);
  EXPECT_GT(fourd.parallel.pipeline_parallel, 1);
}

}  // namespace
}  // namespace moe4d
