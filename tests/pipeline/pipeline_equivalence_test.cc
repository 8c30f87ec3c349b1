// Pipeline-parallel layouts reproduce the single-rank run (docs/model.md §3).
//
// Launched through mpirun with N ranks; each suite SizeN holds the layouts of N ranks. World rank 0
// first runs the single-rank reference in-process (same global batch, same micro-batches:
// micro_batch_num x data replicas of them, same layers), then all ranks run the layout: GPipe, 1F1B
// and interleaved 1F1B with recompute off / full / selective, uneven stage_layers, tied embeddings
// split over the first and last stage, and PP combined with DP, TP and EP up to the full 4-D layout.
// Each of 20 steps from the same weights (tests/common/equivalence_harness.h): loss, aux loss and
// gradient norm within 1e-5 relative, parameters within 1e-4.
#include <gtest/gtest.h>

#include <cmath>

#include "../common/equivalence_harness.h"
#include "../train/train_fixture.h"
#include "comm/mpi/mpi_communicator.h"
#include "train/pipeline_schedule.h"
#include "train/trainer.h"

namespace moe4d {
namespace {

using S = PipelineSchedule;
using R = RecomputeGranularity;

struct Layout {
  int dp = 1, ep = 1, tp = 1, pp = 1;
  S schedule = S::k1F1B;
  int virtual_pipeline = 1;
  R recompute = R::kNone;
  int layers = 4;
  int micro_batches = 4;  // per data replica
  bool tied = false;
  std::vector<int> stage_layers;

  std::string name() const {
    std::string n = fmt::format("dp{}_ep{}_tp{}_pp{}_{}", dp, ep, tp, pp, pipeline_schedule_name(schedule));
    if (virtual_pipeline > 1) n += fmt::format("_v{}", virtual_pipeline);
    n += fmt::format("_m{}_l{}", micro_batches, layers);
    if (recompute == R::kFull) n += "_recompute_full";
    if (recompute == R::kSelective) n += "_recompute_selective";
    if (tied) n += "_tied";
    for (int l : stage_layers) n += fmt::format("_s{}", l);
    return n;
  }
  int size() const { return dp * ep * tp * pp; }
};

class PipelineEquivalence : public ::testing::TestWithParam<Layout> {};

TEST_P(PipelineEquivalence, ReproducesSingleRankRun) {
  const Layout layout = GetParam();
  test::TempDir dir;
  Config config = test::tiny_training_config(test::write_synthetic_shard(dir.file("train.bin"), 64, 20000));
  config.model.num_layers = layout.layers;  // layer_freq 2: odd layers are MoE
  config.model.tie_embeddings = layout.tied;
  ParallelConfig& p = config.parallel;
  p.data_parallel = layout.dp;
  p.expert_parallel = layout.ep;
  p.tensor_parallel = layout.tp;
  p.pipeline_parallel = layout.pp;
  p.pipeline_schedule = layout.schedule;
  p.virtual_pipeline = layout.virtual_pipeline;
  p.stage_layers = layout.stage_layers;
  p.micro_batch_num = layout.micro_batches;
  p.recompute = layout.recompute;
  p.collective_timeout = 60;  // a schedule bug shows up as a named missing rank, not a 5-minute hang
  test::expect_equivalent(test::run_equivalence(config, 20));
}

const Layout kTwoRanks[] = {
    {.pp = 2, .schedule = S::kGPipe},
    {.pp = 2, .schedule = S::kGPipe, .recompute = R::kFull},
    {.pp = 2, .schedule = S::k1F1B},
    {.pp = 2, .schedule = S::k1F1B, .recompute = R::kFull},
    {.pp = 2, .schedule = S::k1F1B, .recompute = R::kSelective},
    {.pp = 2, .schedule = S::kInterleaved, .virtual_pipeline = 2},
    {.pp = 2, .schedule = S::kInterleaved, .virtual_pipeline = 2, .recompute = R::kFull},
    {.pp = 2, .schedule = S::k1F1B, .tied = true},
    {.pp = 2, .schedule = S::k1F1B, .stage_layers = {1, 3}},
};
const Layout kFourRanks[] = {
    {.pp = 4, .schedule = S::kGPipe},
    {.pp = 4, .schedule = S::kGPipe, .recompute = R::kFull},
    {.pp = 4, .schedule = S::k1F1B},
    {.pp = 4, .schedule = S::k1F1B, .recompute = R::kFull},
    {.pp = 4, .schedule = S::kInterleaved, .virtual_pipeline = 2, .layers = 8},
    {.pp = 4, .schedule = S::kInterleaved, .virtual_pipeline = 2, .recompute = R::kFull, .layers = 8},
    {.pp = 4, .schedule = S::kInterleaved, .virtual_pipeline = 2, .layers = 8, .tied = true},
    {.dp = 2, .pp = 2, .schedule = S::k1F1B},
    {.tp = 2, .pp = 2, .schedule = S::kInterleaved, .virtual_pipeline = 2, .recompute = R::kSelective},
    {.ep = 2, .pp = 2, .schedule = S::kGPipe, .recompute = R::kFull},
};
const Layout kEightRanks[] = {
    {.ep = 2, .tp = 2, .pp = 2, .schedule = S::k1F1B},
    {.dp = 2, .ep = 2, .pp = 2, .schedule = S::kInterleaved, .virtual_pipeline = 2, .recompute = R::kFull,
     .micro_batches = 2, .tied = true},
};

auto layout_name = [](const ::testing::TestParamInfo<Layout>& info) { return info.param.name(); };
INSTANTIATE_TEST_SUITE_P(Size2, PipelineEquivalence, ::testing::ValuesIn(kTwoRanks), layout_name);
INSTANTIATE_TEST_SUITE_P(Size4, PipelineEquivalence, ::testing::ValuesIn(kFourRanks), layout_name);
INSTANTIATE_TEST_SUITE_P(Size8, PipelineEquivalence, ::testing::ValuesIn(kEightRanks), layout_name);

}  // namespace
}  // namespace moe4d
