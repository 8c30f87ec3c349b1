// ZeRO 1, 2 and 3 reproduce the zero_stage 0 run of the same layout (docs/model.md §3, docs/zero.md).
//
// Launched through mpirun with N ranks; suite SizeN holds the layouts of N ranks. Every rank trains
// the layout with zero_stage 0 and with zero_stage k in lock-step, on the same communicators (each
// step from the same weights: tests/common/equivalence_harness.h); every step's loss, aux loss and
// gradient norm must agree within 1e-5 relative and the parameters within 1e-4, the gradient norm also
// within 1e-6 at step 1.
// Layouts: DP2, DP3 (slices of unequal length: padding), EP2 (dense parameters sharded over DP x EP,
// experts over DP), DP2 x TP2 (TP-replicated norms counted once in the norm), DP2 x PP2 (1F1B and
// interleaved), tied embeddings on one stage (the head shares the table's bucket) and split over
// two stages (tied gradients summed on the shards), full recompute (ZeRO-3 gathers again for the
// recomputation), grad_clip small enough that every step clips (the global norm is exact), and
// buckets sized in elements small enough to split layers, parameters and the embedding table (with
// several reductions and ZeRO-3 gathers in flight at once; some also against the single-rank run),
// with 16-bit compression (compared 10x wider: see the test) and with the hierarchical all-reduce.
#include <gtest/gtest.h>

#include <cmath>

#include "../common/equivalence_harness.h"
#include "../train/train_fixture.h"
#include "train/pipeline_schedule.h"

namespace moe4d {
namespace {

using S = PipelineSchedule;
using R = RecomputeGranularity;

struct Layout {
  int dp = 1, ep = 1, tp = 1, pp = 1;
  int zero = 1;
  S schedule = S::k1F1B;
  int virtual_pipeline = 1;
  R recompute = R::kNone;
  bool tied = false;
  double grad_clip = 1.0;
  bool overlap = true;
  int micro_batches = 2;  // per data replica
  int global_batch = 8;
  int64_t bucket = 0;     // grad_bucket_size in elements; 0: gradient_aggregation_group 4
  int prefetch = 2;       // zero3_prefetch_buckets
  bool single = false;    // also against the single-rank run
  // 16-bit reductions: the reference is the same stage, compressed, with four counted buckets (a
  // bucketing changes no element's arithmetic, so sized buckets must agree with it).
  GradCompression compression = GradCompression::kNone;
  int ranks_per_node = 0;  // local_worker_num: ZeRO 0/1's hierarchical all-reduce across nodes

  std::string name() const {
    std::string n = fmt::format("dp{}_ep{}_tp{}_pp{}_zero{}", dp, ep, tp, pp, zero);
    if (pp > 1) n += fmt::format("_{}", pipeline_schedule_name(schedule));
    if (virtual_pipeline > 1) n += fmt::format("_v{}", virtual_pipeline);
    if (recompute == R::kFull) n += "_recompute_full";
    if (tied) n += "_tied";
    if (grad_clip < 1.0) n += "_clipped";
    if (!overlap) n += "_no_overlap";
    if (bucket > 0) n += fmt::format("_bucket{}", bucket);
    if (prefetch != 2) n += fmt::format("_prefetch{}", prefetch);
    if (compression == GradCompression::kBF16) n += "_bf16";
    if (compression == GradCompression::kFP16) n += "_fp16";
    if (ranks_per_node > 0) n += fmt::format("_nodes_of{}", ranks_per_node);
    return n;
  }
};

void PrintTo(const Layout& layout, std::ostream* os) { *os << layout.name(); }

class ZeroEquivalence : public ::testing::TestWithParam<Layout> {};

TEST_P(ZeroEquivalence, ReproducesZeroStageZero) {
  const Layout layout = GetParam();
  test::TempDir dir;
  Config config = test::tiny_training_config(test::write_synthetic_shard(dir.file("train.bin"), 64, 20000));
  config.model.num_layers = 4;  // layer_freq 2: odd layers are MoE
  config.model.tie_embeddings = layout.tied;
  config.train.grad_clip = layout.grad_clip;
  config.train.global_batch_size = layout.global_batch;
  ParallelConfig& p = config.parallel;
  p.data_parallel = layout.dp;
  p.expert_parallel = layout.ep;
  p.tensor_parallel = layout.tp;
  p.pipeline_parallel = layout.pp;
  p.pipeline_schedule = layout.schedule;
  p.virtual_pipeline = layout.virtual_pipeline;
  p.micro_batch_num = layout.micro_batches;
  p.recompute = layout.recompute;
  p.overlap_grad_reduce = layout.overlap;
  p.collective_timeout = 60;
  // Counted buckets as before size-based ones; sized ones small enough to split layers, parameters
  // and the embedding table, with many reductions and gathers in flight.
  if (layout.bucket > 0)
    p.grad_bucket_size = layout.bucket;
  else
    p.gradient_aggregation_group = 4;
  p.zero3_prefetch_buckets = layout.prefetch;
  p.local_worker_num = layout.ranks_per_node;
  config.train.grad_compression = layout.compression;
  Config sharded = config;
  sharded.parallel.zero_stage = layout.zero;
  if (layout.compression != GradCompression::kNone) {
    config.parallel.zero_stage = layout.zero;
    config.parallel.grad_bucket_size = 0;
    config.parallel.gradient_aggregation_group = 4;
  }

  // 16-bit compression rounds every reduced gradient element to 11 (fp16) or 8 (bf16) significant
  // bits, so a 1-ulp fp32 difference between the two runs' gradients (the row-blocked weight
  // gradients are bit-identical to one GEMM only on some BLAS kernels, model/block_matmul.h) moves an
  // element across a rounding boundary: 2^-11 or 2^-8 of it. Seen on an AVX2 EPYC: losses 1.4e-5
  // apart, parameters 1.2e-4, gradient norms 1.3e-4. These layouts are compared 10x wider.
  const bool rounded = layout.compression != GradCompression::kNone;
  const test::Tolerance tol = rounded ? test::Tolerance{.loss = 1e-4, .params = 1e-3} : test::Tolerance{};
  if (layout.single) test::expect_equivalent(test::run_equivalence(sharded, 20), tol);
  const test::EquivalenceRun r = test::run_equivalence_between(config, sharded, 20);
  test::expect_equivalent(r, tol);
  if (layout.ranks_per_node == 2) {
    EXPECT_GT(r.run.intra_node_reduce_scatters, 0) << "hierarchical all-reduce";
  }
  if (r.rank != 0) return;
  ASSERT_EQ(r.run.grad_norms.size(), r.reference.grad_norms.size());
  for (size_t i = 0; i < r.reference.grad_norms.size(); ++i) {
    // Step 1 starts from the initial parameters: only the summation order differs (ZeRO-2/3 reduce
    // every micro-batch). Later steps start from the reference's state, which the layout took.
    const double expected = r.reference.grad_norms[i];
    EXPECT_NEAR(r.run.grad_norms[i], expected, (i == 0 ? 1e-6 : rounded ? 1e-3 : 1e-4) * expected)
        << "gradient norm, step " << i + 1;
    if (layout.grad_clip < 1.0) {
      EXPECT_GT(expected, layout.grad_clip) << "clipping should be active, step " << i + 1;
    }
  }
}

std::string name_of(const ::testing::TestParamInfo<Layout>& info) { return info.param.name(); }

const Layout kTwoRanks[] = {
    {.dp = 2, .zero = 1},
    {.dp = 2, .zero = 2},
    {.dp = 2, .zero = 3},
    {.dp = 2, .zero = 1, .grad_clip = 0.05},
    {.dp = 2, .zero = 2, .grad_clip = 0.05},
    {.dp = 2, .zero = 3, .grad_clip = 0.05},
    {.dp = 2, .zero = 2, .overlap = false},
    {.dp = 2, .zero = 3, .tied = true},
    {.dp = 2, .zero = 3, .recompute = R::kFull},
    {.ep = 2, .zero = 2},
    {.ep = 2, .zero = 3, .grad_clip = 0.05},
    {.pp = 2, .zero = 3, .micro_batches = 4},
    // Buckets of 256 elements (the table is 8 of them, an expert tensor 18): every stage.
    {.dp = 2, .zero = 1, .bucket = 256},
    {.dp = 2, .zero = 2, .bucket = 256, .single = true},
    {.dp = 2, .zero = 3, .bucket = 256, .prefetch = 3, .single = true},
    {.dp = 2, .zero = 2, .overlap = false, .bucket = 256},
    {.dp = 2, .zero = 3, .tied = true, .grad_clip = 0.05, .bucket = 200, .prefetch = 1},
    {.ep = 2, .zero = 3, .recompute = R::kFull, .bucket = 256, .prefetch = 1},
    {.ep = 2, .zero = 2, .bucket = 1000},
    {.dp = 2, .zero = 2, .bucket = 256, .compression = GradCompression::kBF16},
    {.dp = 2, .zero = 1, .bucket = 256, .compression = GradCompression::kFP16},
    {.dp = 2, .zero = 3, .tied = true, .bucket = 256, .compression = GradCompression::kBF16},
    // ZeRO-3 without prefetch: every read gathers its buckets (tables and experts split over them).
    {.dp = 2, .zero = 3, .bucket = 256, .prefetch = 0, .single = true},
    {.dp = 2, .zero = 3, .tied = true, .bucket = 200, .prefetch = 0},
    {.ep = 2, .zero = 3, .bucket = 256, .prefetch = 0},
};
INSTANTIATE_TEST_SUITE_P(Size2, ZeroEquivalence, ::testing::ValuesIn(kTwoRanks), name_of);

// Three ranks: buckets of 16-aligned lengths split in three leave the last slice short.
const Layout kThreeRanks[] = {
    {.dp = 3, .zero = 1, .global_batch = 6},
    {.dp = 3, .zero = 2, .global_batch = 6},
    {.dp = 3, .zero = 3, .grad_clip = 0.05, .global_batch = 6},
    {.dp = 3, .zero = 3, .global_batch = 6, .bucket = 100},
};
INSTANTIATE_TEST_SUITE_P(Size3, ZeroEquivalence, ::testing::ValuesIn(kThreeRanks), name_of);

const Layout kFourRanks[] = {
    {.dp = 2, .pp = 2, .zero = 1, .micro_batches = 4, .global_batch = 16},
    {.dp = 2, .pp = 2, .zero = 2, .micro_batches = 4, .global_batch = 16},
    {.dp = 2, .pp = 2, .zero = 3, .micro_batches = 4, .global_batch = 16},
    {.dp = 2, .pp = 2, .zero = 2, .tied = true, .grad_clip = 0.05, .micro_batches = 4, .global_batch = 16},
    {.dp = 2, .pp = 2, .zero = 3, .tied = true, .micro_batches = 4, .global_batch = 16},
    {.dp = 2, .pp = 2, .zero = 2, .schedule = S::kInterleaved, .virtual_pipeline = 2, .micro_batches = 4,
     .global_batch = 16},
    {.dp = 2, .pp = 2, .zero = 3, .schedule = S::kInterleaved, .virtual_pipeline = 2, .micro_batches = 4,
     .global_batch = 16},
    {.ep = 2, .pp = 2, .zero = 3, .grad_clip = 0.05, .micro_batches = 4, .global_batch = 16},
    {.dp = 2, .tp = 2, .zero = 2, .grad_clip = 0.05},
    {.dp = 2, .ep = 2, .zero = 3, .recompute = R::kFull, .global_batch = 16},
    // Dense reads gathered over DP x EP = 4, expert reads over DP = 2, each group with its window.
    {.dp = 2, .ep = 2, .zero = 3, .global_batch = 16, .bucket = 256, .prefetch = 1},
    // The tied table split over two stages and over buckets: both copies are cut alike.
    {.dp = 2, .pp = 2, .zero = 3, .tied = true, .micro_batches = 4, .global_batch = 16, .bucket = 256},
    {.dp = 2, .pp = 2, .zero = 2, .tied = true, .micro_batches = 4, .global_batch = 16, .bucket = 300},
    {.dp = 2, .pp = 2, .zero = 3, .schedule = S::kInterleaved, .virtual_pipeline = 2, .micro_batches = 4,
     .global_batch = 16, .bucket = 256},
    // Two simulated nodes of two ranks: the dense group (DP x EP = 4) all-reduces hierarchically.
    {.dp = 2, .ep = 2, .zero = 1, .global_batch = 16, .bucket = 256, .single = true, .ranks_per_node = 2},
};
INSTANTIATE_TEST_SUITE_P(Size4, ZeroEquivalence, ::testing::ValuesIn(kFourRanks), name_of);

}  // namespace
}  // namespace moe4d
