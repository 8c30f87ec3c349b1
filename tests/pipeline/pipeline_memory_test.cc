// Measured pipeline behaviour on 2 ranks (PP2, 8 micro-batches), from the metrics record a step writes:
// - 1F1B holds at most p micro-batches of activations on the first stage, GPipe holds all m;
// - full and selective recompute lower the measured peak;
// - the record carries the schedule, busy / idle time, the measured bubble next to the formula, and
//   (on the steps that keep it) a timeline with one box per forward / backward of every stage;
// - micro_batch_num < pipeline_parallel is refused.
#include <gtest/gtest.h>

#include <map>

#include "../train/train_fixture.h"
#include "comm/mpi/mpi_communicator.h"
#include "core/error.h"
#include "train/pipeline_schedule.h"
#include "train/trainer.h"

namespace moe4d {
namespace {

using S = PipelineSchedule;
using R = RecomputeGranularity;

constexpr int kStages = 2;
constexpr int kMicroBatches = 8;

class PipelineMeasurement : public ::testing::Test {
 protected:
  PipelineMeasurement() {
    world_ = MpiCommunicator::world(CommOptions{.timeout_seconds = 120});
    config_ = test::tiny_training_config(test::write_synthetic_shard(dir_.file("train.bin"), 64, 20000));
    config_.model.num_layers = 4;
    config_.parallel.pipeline_parallel = kStages;
    config_.parallel.micro_batch_num = kMicroBatches;
    config_.train.global_batch_size = 8 * kMicroBatches / 4;  // 2 sequences per micro-batch
    config_.parallel.collective_timeout = 60;
    pc_ = make_parallel_context(std::move(world_), config_.parallel, 0);
  }

  // The metrics record of the second step of a run with this schedule and recompute.
  nlohmann::json second_step(S schedule, R recompute) {
    Config c = config_;
    c.parallel.pipeline_schedule = schedule;
    c.parallel.recompute = recompute;
    Trainer trainer(c, *pc_, {.resume_from = {}, .exit_after = 0, .quiet = true, .metrics_path = "/dev/null"});
    trainer.train_step();
    return trainer.train_step().record;
  }

  test::TempDir dir_;
  std::unique_ptr<MpiCommunicator> world_;
  Config config_;
  std::unique_ptr<ParallelContext> pc_;
};

int64_t at(const nlohmann::json& pipeline, const char* key, int stage) { return pipeline[key][stage].get<int64_t>(); }

TEST_F(PipelineMeasurement, OneFOneBBoundsFirstStageActivationsGPipeHoldsAll) {
  const nlohmann::json gpipe = second_step(S::kGPipe, R::kNone)["pipeline"];
  const nlohmann::json ofob = second_step(S::k1F1B, R::kNone)["pipeline"];
  // Micro-batches in flight, counted by the executor.
  EXPECT_EQ(at(gpipe, "peak_in_flight", 0), kMicroBatches);
  EXPECT_EQ(at(gpipe, "peak_in_flight", 1), kMicroBatches);
  EXPECT_EQ(at(ofob, "peak_in_flight", 0), kStages);
  EXPECT_EQ(at(ofob, "peak_in_flight", 1), 1);
  // Bytes, from the arenas: one micro-batch's saved activations on stage 0 is the same in both runs.
  const int64_t one = at(ofob, "micro_batch_activation_bytes", 0);
  ASSERT_GT(one, 0);
  EXPECT_EQ(one, at(gpipe, "micro_batch_activation_bytes", 0));
  // 1F1B: p micro-batches plus the gradient buffer of the backward in progress (less than one more).
  EXPECT_LE(at(ofob, "peak_activation_bytes", 0), kStages * one + one / 2);
  EXPECT_GE(at(ofob, "peak_activation_bytes", 0), kStages * one);
  EXPECT_GE(at(gpipe, "peak_activation_bytes", 0), kMicroBatches * one);
  EXPECT_GT(at(gpipe, "peak_activation_bytes", 0), 3 * at(ofob, "peak_activation_bytes", 0));
}

TEST_F(PipelineMeasurement, RecomputeLowersTheMeasuredPeak) {
  for (S schedule : {S::kGPipe, S::k1F1B}) {
    const nlohmann::json none = second_step(schedule, R::kNone)["pipeline"];
    const nlohmann::json full = second_step(schedule, R::kFull)["pipeline"];
    const nlohmann::json selective = second_step(schedule, R::kSelective)["pipeline"];
    for (int s = 0; s < kStages; ++s) {
      const std::string where = fmt::format("{} stage {}", pipeline_schedule_name(schedule), s);
      EXPECT_LT(at(full, "peak_activation_bytes", s), at(none, "peak_activation_bytes", s)) << where;
      EXPECT_LT(at(selective, "peak_activation_bytes", s), at(none, "peak_activation_bytes", s)) << where;
      EXPECT_LT(at(full, "peak_activation_bytes", s), at(selective, "peak_activation_bytes", s)) << where;
      // Full recompute rebuilds a layer's activations in scratch, which lives only during its backward.
      EXPECT_GT(at(full, "peak_scratch_bytes", s), at(none, "peak_scratch_bytes", s)) << where;
    }
    EXPECT_EQ(full["recompute"], "full");
  }
}

TEST_F(PipelineMeasurement, RecordCarriesBubbleAndTimeline) {
  const nlohmann::json record = second_step(S::k1F1B, R::kNone);
  ASSERT_TRUE(record.contains("pipeline"));
  const nlohmann::json& p = record["pipeline"];
  EXPECT_EQ(p["schedule"], "1f1b");
  EXPECT_EQ(p["stages"], kStages);
  EXPECT_EQ(p["micro_batches"], kMicroBatches);
  EXPECT_NEAR(p["bubble_formula"].get<double>(), 1.0 / (kMicroBatches + 1), 1e-12);
  const double bubble = p["bubble_measured"].get<double>();
  EXPECT_GT(bubble, 0.0);
  EXPECT_LT(bubble, 1.0);
  // The replay of the schedule with the measured per-chunk times has a bubble too (p = 2).
  EXPECT_GT(p["bubble_replayed"].get<double>(), 0.0);
  EXPECT_LT(p["bubble_replayed"].get<double>(), 1.0);
  ASSERT_EQ(p["forward_s"].size(), size_t(kStages));
  ASSERT_EQ(p["backward_s"][1].size(), 1u);  // one chunk per stage
  EXPECT_GT(p["backward_s"][1][0].get<double>(), 0.0);
  const double span = p["span_s"].get<double>();
  for (int s = 0; s < kStages; ++s) {
    const double busy = p["busy_s"][s].get<double>(), idle = p["idle_s"][s].get<double>();
    EXPECT_GT(busy, 0.0);
    EXPECT_NEAR(busy + idle, span, 1e-9);
  }
  // Step 2 keeps the timeline: 2 x m boxes per stage, forward before backward of the same micro-batch,
  // no two boxes of one stage overlapping.
  ASSERT_TRUE(record.contains("pipeline_timeline"));
  const nlohmann::json& timeline = record["pipeline_timeline"];
  ASSERT_EQ(timeline.size(), size_t(2 * kMicroBatches * kStages));
  std::map<std::pair<int, int>, double> forward_end;
  std::vector<double> stage_end(kStages, 0.0);
  for (const auto& box : timeline) {
    const int stage = box["stage"], mb = box["micro_batch"];
    const double start = box["start_s"], end = box["end_s"];
    EXPECT_LE(start, end);
    EXPECT_GE(start, stage_end[stage]) << "overlapping boxes on stage " << stage;
    stage_end[stage] = end;
    if (box["kind"] == "forward") {
      forward_end[{stage, mb}] = end;
    } else {
      ASSERT_EQ(box["kind"], "backward");
      const auto forward = forward_end.find({stage, mb});
      ASSERT_NE(forward, forward_end.end());
      EXPECT_GE(start, forward->second);
    }
  }
  // Step 3 is not a timeline step (keeps the metrics file small).
  EXPECT_FALSE(StepExecutor::records_timeline(3, 20));
  EXPECT_TRUE(StepExecutor::records_timeline(20, 20));
}

TEST_F(PipelineMeasurement, FewerMicroBatchesThanStagesIsRefused) {
  Config c = config_;
  c.parallel.micro_batch_num = 1;
  try {
    Trainer trainer(c, *pc_, {.resume_from = {}, .exit_after = 0, .quiet = true, .metrics_path = "/dev/null"});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("micro_batch_num 1 is smaller than pipeline_parallel 2"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace moe4d
