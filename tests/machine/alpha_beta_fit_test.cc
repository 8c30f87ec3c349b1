// tests/machine/alpha_beta_fit_test.cc — the alpha-beta fit against synthetic timings, and the GEMM
// efficiency curve built from synthetic shape timings.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "core/rng.h"
#include "machine/alpha_beta_fit.h"
#include "machine/gemm_survey.h"

namespace moe4d {
namespace {

// nccl-tests bus factors, written out independently of plan/comm_model.h.
double factor_of(Collective coll, int ranks) {
  if (coll == Collective::kAllReduce) return 2.0 * (ranks - 1) / ranks;
  if (coll == Collective::kSendRecv) return 1.0;
  return double(ranks - 1) / ranks;
}

std::vector<TimingSample> synthetic(Collective coll, int ranks, double latency, double bus_bw, double noise = 0,
                                    uint64_t seed = 1) {
  const double factor = factor_of(coll, ranks);
  std::vector<TimingSample> out;
  int i = 0;
  for (double bytes = 1024; bytes <= 64.0 * 1024 * 1024; bytes *= 4, ++i) {
    const double t = latency + factor * bytes / bus_bw;
    out.push_back({bytes, t * (1 + noise * normal_at(seed, i))});
  }
  return out;
}

TEST(AlphaBetaFit, RecoversExactLatencyAndBandwidthForEveryCollective) {
  for (Collective coll : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather,
                          Collective::kAllToAll, Collective::kSendRecv}) {
    for (int ranks : {2, 3, 4}) {
      const AlphaBetaFit fit = fit_alpha_beta(synthetic(coll, ranks, 7e-6, 3.5e9), coll, ranks);
      EXPECT_NEAR(fit.latency, 7e-6, 1e-12) << collective_name(coll) << " n=" << ranks;
      EXPECT_NEAR(fit.bus_bandwidth / 3.5e9, 1.0, 1e-9) << collective_name(coll) << " n=" << ranks;
      EXPECT_LT(fit.max_relative_error, 1e-9);
      EXPECT_NEAR(alpha_beta_seconds(fit, coll, ranks, 1 << 20), 7e-6 + factor_of(coll, ranks) * (1 << 20) / 3.5e9,
                  1e-12);
    }
  }
}

TEST(AlphaBetaFit, NoisyTimingsStayCloseAndTheErrorsAreReported) {
  // 5% relative noise: latency and bandwidth within ~10%, and the fit reports errors of that order.
  const AlphaBetaFit fit = fit_alpha_beta(synthetic(Collective::kAllReduce, 2, 20e-6, 2e9, 0.05, 7),
                                          Collective::kAllReduce, 2);
  EXPECT_NEAR(fit.latency / 20e-6, 1.0, 0.15);
  EXPECT_NEAR(fit.bus_bandwidth / 2e9, 1.0, 0.10);
  EXPECT_GT(fit.max_relative_error, 0.005);
  EXPECT_LT(fit.max_relative_error, 0.25);
  EXPECT_LE(fit.median_relative_error, fit.max_relative_error);
}

TEST(AlphaBetaFit, RelativeWeightingKeepsTheLatencyOfSmallMessages) {
  // An absolute least-squares fit would be dominated by the 64 MiB sample; the relative fit must
  // still put 1 KiB within a few percent when the model is exact up to 1% noise.
  const auto samples = synthetic(Collective::kAllGather, 4, 50e-6, 1e9, 0.01, 3);
  const AlphaBetaFit fit = fit_alpha_beta(samples, Collective::kAllGather, 4);
  EXPECT_NEAR(alpha_beta_seconds(fit, Collective::kAllGather, 4, samples.front().bytes) / samples.front().seconds,
              1.0, 0.03);
}

TEST(AlphaBetaFit, NegativeLatencyIsClampedToZero) {
  // 1 GB/s with no latency, the smallest message 10% faster than that: the unconstrained line would
  // need a negative intercept.
  std::vector<TimingSample> samples = {{1e3, 0.9e-6}, {1e6, 1e-3}, {1e7, 1.0e-2}};
  const AlphaBetaFit fit = fit_alpha_beta(samples, Collective::kSendRecv, 2);
  EXPECT_EQ(fit.latency, 0.0);
  EXPECT_NEAR(fit.bus_bandwidth, 1e9, 1e8);
}

TEST(AlphaBetaFit, TimingsThatDoNotGrowUseTheLargestSample) {
  std::vector<TimingSample> samples = {{1e3, 5e-3}, {1e4, 4e-3}, {1e5, 3e-3}};
  const AlphaBetaFit fit = fit_alpha_beta(samples, Collective::kSendRecv, 2);
  EXPECT_GT(fit.bus_bandwidth, 0);
  EXPECT_GE(fit.latency, 0);
}

TEST(AlphaBetaFit, RefusesTooFewSizesAndNonPositiveTimes) {
  EXPECT_THROW(fit_alpha_beta({{1024, 1e-5}, {1024, 2e-5}}, Collective::kAllReduce, 2), Error);
  EXPECT_THROW(fit_alpha_beta({{1024, 1e-5}, {4096, 0}}, Collective::kAllReduce, 2), Error);
  try {
    fit_alpha_beta({{1024, 1e-5}}, Collective::kAllToAll, 3);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "alpha-beta fit of all_to_all over 3 ranks: needs samples at two or more message sizes, got 1");
  }
}

TEST(AlphaBetaRegimes, OneLineWhenOneLineFits) {
  const PiecewiseAlphaBeta fit =
      fit_alpha_beta_regimes(synthetic(Collective::kAllReduce, 2, 5e-6, 4e9, 0.02, 11), Collective::kAllReduce, 2);
  ASSERT_EQ(fit.regimes.size(), 1u);
  EXPECT_EQ(fit.regimes[0].min_bytes, 0.0);
  EXPECT_LT(fit.max_relative_error, 0.10);
}

TEST(AlphaBetaRegimes, ACacheCliffGetsItsOwnRegime) {
  // 2 us + 8 GB/s up to 8 MiB, then 4x slower per byte (out of cache) from 16 MiB on; sizes x2 apart
  // as moe4d bench measures them.
  std::vector<TimingSample> samples;
  for (double bytes = 1024; bytes <= 64.0 * 1024 * 1024; bytes *= 2) {
    const double bw = bytes >= 16.0 * 1024 * 1024 ? 2e9 : 8e9;
    samples.push_back({bytes, 2e-6 + bytes / bw});
  }
  const PiecewiseAlphaBeta single = fit_alpha_beta_regimes(samples, Collective::kSendRecv, 2, 1);
  EXPECT_GT(single.max_relative_error, 0.3) << "one line cannot follow the cliff";
  const PiecewiseAlphaBeta fit = fit_alpha_beta_regimes(samples, Collective::kSendRecv, 2);
  ASSERT_GE(fit.regimes.size(), 2u);
  EXPECT_LT(fit.max_relative_error, 0.10);
  // The last regime starts between 8 MiB and 16 MiB (geometric mean) and has the slow bandwidth.
  EXPECT_NEAR(fit.regimes.back().min_bytes, std::sqrt(8.0 * 16) * 1024 * 1024, 1);
  EXPECT_NEAR(fit.regimes.back().fit.bus_bandwidth / 2e9, 1.0, 0.02);
  EXPECT_NEAR(fit.at(64.0 * 1024 * 1024).bus_bandwidth / 2e9, 1.0, 0.02);
  EXPECT_NEAR(alpha_beta_seconds(fit.at(4096), Collective::kSendRecv, 2, 4096) / (2e-6 + 4096 / 8e9), 1.0, 0.05);
  for (size_t i = 1; i < fit.regimes.size(); ++i) EXPECT_GT(fit.regimes[i].min_bytes, fit.regimes[i - 1].min_bytes);
}

TEST(AlphaBetaRegimes, FewSamplesStayOneRegime) {
  std::vector<TimingSample> samples = {{1e3, 1e-6}, {1e4, 5e-6}, {1e5, 1e-4}, {1e6, 1e-3}, {1e7, 1e-2}};
  const PiecewiseAlphaBeta fit = fit_alpha_beta_regimes(samples, Collective::kAllToAll, 2);
  EXPECT_EQ(fit.regimes.size(), 1u);  // two runs of >= 3 sizes need 6 sizes
  EXPECT_GT(fit.max_relative_error, 0.10);
}

TEST(GemmEfficiencyCurve, BinsBySizeWithFlopWeightedEfficiencyBelowOne) {
  GemmSurvey survey;
  survey.available = true;
  // Synthetic machine: 100 GFLOP/s peak, efficiency rising with size as size / (size + 64).
  for (int s : {16, 32, 64, 128, 256, 512}) {
    for (const GemmShape& shape : {GemmShape{s, s, s, "cube"}, GemmShape{4 * s, s / 2, s / 2, "tall"}}) {
      const double eff = shape.size() / (shape.size() + 64);
      survey.timings.push_back({shape, shape.flops() / (100e9 * eff), 100 * eff * 1.05});
    }
  }
  fit_efficiency_curve(survey);
  ASSERT_GE(survey.curve.size(), 6u);
  // Peak: the best single variant (5% above the mean of the variants at the largest size).
  EXPECT_NEAR(survey.peak_flops / 1e9, 100 * 512.0 / 576 * 1.05, 1e-6);
  for (size_t i = 0; i < survey.curve.size(); ++i) {
    EXPECT_GT(survey.curve[i].efficiency, 0);
    EXPECT_LE(survey.curve[i].efficiency, 1);
    if (i > 0) {
      EXPECT_GT(survey.curve[i].size, survey.curve[i - 1].size);
      EXPECT_GT(survey.curve[i].efficiency, survey.curve[i - 1].efficiency);
    }
    // Each point is the synthetic curve at its size, relative to the measured peak.
    const double expected = survey.curve[i].size / (survey.curve[i].size + 64) * 100e9 / survey.peak_flops;
    EXPECT_NEAR(survey.curve[i].efficiency, expected, 0.03 * expected);
  }
}

TEST(GemmSurveyShapes, CoverTheModelGemmsFromSmallToLarge) {
  const auto full = gemm_survey_shapes(false);
  const auto quick = gemm_survey_shapes(true);
  EXPECT_GT(full.size(), 50u);
  EXPECT_LT(quick.size(), full.size());
  EXPECT_LT(full.front().size(), 100);  // attention's per-head GEMMs at S 128, hd 32
  EXPECT_GT(full.back().size(), 1000);
  bool has_head = false, has_attention = false;
  for (const GemmShape& s : full) {
    has_head = has_head || s.n == 4096;
    has_attention = has_attention || s.label.rfind("QK^T", 0) == 0;
  }
  EXPECT_TRUE(has_head);
  EXPECT_TRUE(has_attention);
}

TEST(GemmSurvey, Fp32QuickSurveyMeasuresPositiveRates) {
  GemmSurvey s = time_gemm_shapes(Precision::kFP32, gemm_survey_shapes(true), 1, {});
  ASSERT_TRUE(s.available);
  ASSERT_EQ(s.timings.size(), gemm_survey_shapes(true).size());
  fit_efficiency_curve(s);
  EXPECT_GT(s.peak_flops, 1e8);  // any CPU of this century does 0.1 GFLOP/s
  EXPECT_FALSE(s.curve.empty());
}

TEST(GemmSurvey, SixteenBitIsMeasuredOrExplained) {
  const GemmSurvey s = time_gemm_shapes(Precision::kBF16, gemm_survey_shapes(true), 1, {});
  if (s.available) {
    EXPECT_FALSE(s.timings.empty());
    EXPECT_FALSE(s.implementation.empty());
  } else {
    EXPECT_TRUE(s.timings.empty());
    EXPECT_NE(s.reason.find("bf16"), std::string::npos) << s.reason;
  }
}

}  // namespace
}  // namespace moe4d
