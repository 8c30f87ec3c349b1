// tests/plan/cost_terms_test.cc — the time model's costs beyond FLOPs and bytes on the wire (issue 25):
// the GEMM roofline, Megatron's square unfused attention with its softmax and dropout passes, the
// per-kernel overhead, the step's scalar all-reduces and the straggler factor, against hand values.
#include <gtest/gtest.h>

#include <cmath>

#include "plan/comm_model.h"
#include "plan/compute_model.h"
#include "plan_test_util.h"

namespace moe4d {
namespace {

using testing::flat_cluster;
using testing::make_layout;
using testing::tiny_moe;
using testing::tiny_setup;

// Roofline: at 1e9 B/s reading A, B and writing C (3 x 1e4 fp32 elements) takes longer than the FLOPs;
// 16-bit elements move half the bytes; the FLOP part alone is what on-chip attention blocks pay.
TEST(CostTerms, GemmRoofline) {
  ClusterSpec c = flat_cluster(1, 1);  // 1e12 FLOP/s at efficiency 0.5
  c.device.memory_bandwidth = 1e9;
  EXPECT_DOUBLE_EQ(gemm_seconds(c, Precision::kFP32, 100, 100, 100, 2), 2 * 3e4 * 4 / 1e9);
  EXPECT_DOUBLE_EQ(gemm_seconds(c, Precision::kBF16, 100, 100, 100), 3e4 * 2 / 1e9);
  EXPECT_DOUBLE_EQ(gemm_compute_seconds(c, Precision::kFP32, 100, 100, 100, 2), 2 * 2e6 / 5e11);
}

// Wave quantisation: 108 SMs, 256 x 128 tiles. [2048, 9600]: 8 x 75 = 600 tiles (or 16 x 38 = 608 the
// other way round) run in 6 waves of 108: 608 / 648 busy. Whole waves and GEMMs under one wave lose nothing.
TEST(CostTerms, WaveQuantisation) {
  EXPECT_DOUBLE_EQ(wave_utilisation(108, 2048, 9600, 1), 608.0 / 648);
  EXPECT_DOUBLE_EQ(wave_utilisation(108, 256 * 108, 128, 1), 1);
  EXPECT_DOUBLE_EQ(wave_utilisation(108, 256, 128, 100), 1);  // 100 tiles: under one wave
  EXPECT_DOUBLE_EQ(wave_utilisation(0, 2048, 9600, 1), 1);    // not modelled
  ClusterSpec c = flat_cluster(1, 1);
  c.device.memory_bandwidth = 1e15;
  const double whole = gemm_seconds(c, Precision::kBF16, 2048, 9600, 4096);
  c.device.compute_units = 108;
  EXPECT_DOUBLE_EQ(gemm_seconds(c, Precision::kBF16, 2048, 9600, 4096), whole * 648 / 608);
}

// Megatron-LM before flash attention: the whole S x S square in the attention GEMMs, and the softmax
// and dropout as passes over the stored probabilities; every kernel pays the device's fixed cost.
TEST(CostTerms, SquareAttentionDropoutAndKernelOverhead) {
  const ModelConfig m = tiny_moe();  // d 8, 2 heads of 4, f 16, S 4
  TrainingSetup s = tiny_setup();    // fp32
  ClusterSpec c = flat_cluster(1, 1);
  c.device.memory_bandwidth = 1e15;  // GEMMs compute-bound
  const Layout l = make_layout(1, 1, 1, 1, 2, 1);  // b 2, T 8
  const LayerCompute blocks = layer_compute(m, s, l, c, false);
  c.device.square_attention = true;
  const LayerCompute square = layer_compute(m, s, l, c, false);
  // The causal blocks of 64 already cover S = 4 whole: the same FLOPs, 2 x (b h) x 2 S S hd = 512.
  EXPECT_DOUBLE_EQ(square.forward.flops, blocks.forward.flops);
  const double probs = 2 * 2 * 4 * 4 * 4.0;  // [b, h, S, S] fp32
  EXPECT_DOUBLE_EQ(square.forward.elementwise_time, blocks.forward.elementwise_time);  // softmax: 2 passes either way
  EXPECT_DOUBLE_EQ(square.backward_elementwise_extra, (3 - 4) * probs / 1e15);      // its backward: 3, not 2 x 2
  s.dropout = true;
  const LayerCompute dropped = layer_compute(m, s, l, c, false);
  // Attention dropout: 2 passes + a one-byte mask over the probabilities; hidden dropout: 2 masks of [T, d].
  EXPECT_NEAR(dropped.forward.elementwise_time - square.forward.elementwise_time,
              ((2 + 0.25) * probs + 2 * 8 * 8) / 1e15, 1e-24);
  EXPECT_DOUBLE_EQ(dropped.backward_elementwise_extra, (4.25 + 1 - 2 * 4.25) * probs / 1e15);
  EXPECT_EQ(square.forward.overhead_time, 0);
  // At S = 128 the square also computes the masked half that two 64-row causal blocks skip: per
  // (sequence, head) 4 S^2 hd = 262144 FLOPs against 4 x 64 x hd x (64 + 128) = 196608, times b h = 4.
  TrainingSetup longer = tiny_setup();
  longer.seq_length = 128;
  c.device.square_attention = false;
  const double blocks128 = layer_compute(m, longer, l, c, false).forward.flops;
  c.device.square_attention = true;
  EXPECT_DOUBLE_EQ(layer_compute(m, longer, l, c, false).forward.flops - blocks128, 4 * (262144.0 - 196608.0));
  c.device.kernel_overhead = 1e-6;
  // Unfused attention (QK^T, softmax, PV) + 7 others + dense FFN 4 = 14 kernels; dropout adds one.
  EXPECT_DOUBLE_EQ(layer_compute(m, tiny_setup(), l, c, false).forward.overhead_time, 14e-6);
  EXPECT_DOUBLE_EQ(layer_compute(m, s, l, c, false).forward.overhead_time, 15e-6);
  c.device.fused_attention = true;
  EXPECT_DOUBLE_EQ(layer_compute(m, tiny_setup(), l, c, false).forward.overhead_time, 12e-6);
}

TEST(CostTerms, ScalarAllReduceIsATreeAndStragglersGrowWithRanks) {
  const ClusterSpec c = flat_cluster(8, 8);  // intra 1 us, inter 10 us per step
  EXPECT_DOUBLE_EQ(scalar_all_reduce_seconds(c, 1), 0);
  EXPECT_NEAR(scalar_all_reduce_seconds(c, 8), 2 * 3 * 1e-6, 1e-18);
  EXPECT_NEAR(scalar_all_reduce_seconds(c, 64), 2 * (3 * 1e-5 + 3 * 1e-6), 1e-18);
  EXPECT_DOUBLE_EQ(straggler_factor(0.01, 1), 1);
  EXPECT_DOUBLE_EQ(straggler_factor(0, 4096), 1);
  EXPECT_DOUBLE_EQ(straggler_factor(0.01, 3072), 1 + 0.01 * std::sqrt(2 * std::log(3072.0)));
  EXPECT_GT(straggler_factor(0.01, 3072), straggler_factor(0.01, 32));
}

}  // namespace
}  // namespace moe4d
