// Training with the expert all-to-all cut into slices (moe.a2a_chunks 2 and 4) reproduces the
// single-rank run, like every other layout (docs/model.md §3; the pattern of
// tests/parallel_train/equivalence_test.cc): each of 20 steps from the same weights, loss, aux loss
// and gradient norm within 1e-5 relative, parameters within 1e-4. EP2 runs under 2 ranks, EP2 x TP2
// under 4.
#include <gtest/gtest.h>

#include <cmath>

#include "../common/equivalence_harness.h"
#include "../train/train_fixture.h"
#include "comm/mpi/mpi_communicator.h"
#include "train/trainer.h"

namespace moe4d {
namespace {

struct ChunkedLayout {
  int ep = 1, tp = 1, chunks = 1;
  std::string name() const {
    return "ep" + std::to_string(ep) + "_tp" + std::to_string(tp) + "_chunks" + std::to_string(chunks);
  }
};

class ChunkedEquivalence : public ::testing::TestWithParam<ChunkedLayout> {};

TEST_P(ChunkedEquivalence, ReproducesSingleRankRun) {
  const ChunkedLayout layout = GetParam();
  test::TempDir dir;
  Config config = test::tiny_training_config(test::write_synthetic_shard(dir.file("train.bin"), 64, 20000));
  config.model.moe.a2a_chunks = layout.chunks;
  config.parallel.expert_parallel = layout.ep;
  config.parallel.tensor_parallel = layout.tp;
  config.parallel.collective_timeout = 120;
  const int steps = 20;
  const test::EquivalenceRun r = test::run_equivalence(config, steps);
  // The slices really were sent: per MoE layer and micro-batch, `chunks` all-to-alls for each of the
  // four moves (dispatch and combine, forward and backward).
  const int moe_layers = 1;
  EXPECT_EQ(r.run.all_to_all_calls, int64_t(steps) * config.parallel.micro_batch_num * moe_layers * 4 * layout.chunks);
  test::expect_equivalent(r);
}

const ChunkedLayout kTwoRanks[] = {{.ep = 2, .chunks = 2}, {.ep = 2, .chunks = 4}};
const ChunkedLayout kFourRanks[] = {{.ep = 2, .tp = 2, .chunks = 2}, {.ep = 2, .tp = 2, .chunks = 4}};

auto layout_name = [](const ::testing::TestParamInfo<ChunkedLayout>& info) { return info.param.name(); };
INSTANTIATE_TEST_SUITE_P(Size2, ChunkedEquivalence, ::testing::ValuesIn(kTwoRanks), layout_name);
INSTANTIATE_TEST_SUITE_P(Size4, ChunkedEquivalence, ::testing::ValuesIn(kFourRanks), layout_name);

}  // namespace
}  // namespace moe4d
