// The dynamic loss scaler's state machine (overflow halves, window doubles, hysteresis, minimum,
// checkpoint state) and the non-finite guard's skip / stop policy.
#include <gtest/gtest.h>

#include "core/error.h"
#include "train/loss_scaler.h"
#include "train/nonfinite_guard.h"

namespace moe4d {
namespace {

LossScaleConfig scaling(double initial, int window, int hysteresis = 1) {
  return {.initial = initial, .factor = 2.0, .window = window, .hysteresis = hysteresis};
}

TEST(LossScaler, Fp16OverflowHalvesAndAWindowOfGoodStepsDoubles) {
  LossScaler s(Precision::kFP16, scaling(65536, 3));
  EXPECT_TRUE(s.dynamic());
  EXPECT_EQ(s.scale(), 65536);
  s.update(false);
  s.update(false);
  EXPECT_EQ(s.scale(), 65536);
  s.update(true);  // overflow: halve, and the growth window restarts
  EXPECT_EQ(s.scale(), 32768);
  EXPECT_EQ(s.good_steps(), 0);
  s.update(false);
  s.update(false);
  EXPECT_EQ(s.scale(), 32768);
  s.update(false);  // third good step in a row: double
  EXPECT_EQ(s.scale(), 65536);
  s.update(false);
  s.update(false);
  s.update(false);
  EXPECT_EQ(s.scale(), 131072);
  EXPECT_EQ(s.overflow_steps(), 1);
}

TEST(LossScaler, HysteresisLowersOnlyAfterConsecutiveOverflows) {
  LossScaler s(Precision::kFP16, scaling(1024, 1000, 2));
  s.update(true);
  EXPECT_EQ(s.scale(), 1024);  // first overflow tolerated
  s.update(false);             // a good step resets the count
  s.update(true);
  EXPECT_EQ(s.scale(), 1024);
  s.update(true);  // second in a row
  EXPECT_EQ(s.scale(), 512);
  s.update(true);  // the count started again
  EXPECT_EQ(s.scale(), 512);
  s.update(true);
  EXPECT_EQ(s.scale(), 256);
  EXPECT_EQ(s.overflow_steps(), 5);
}

TEST(LossScaler, NeverBelowTheMinimum) {
  LossScaler s(Precision::kFP16, scaling(4, 1000));
  EXPECT_TRUE(s.can_absorb_overflow());
  s.update(true);
  s.update(true);
  EXPECT_EQ(s.scale(), LossScaler::kMinScale);
  EXPECT_FALSE(s.can_absorb_overflow());
  s.update(true);
  EXPECT_EQ(s.scale(), LossScaler::kMinScale);
}

TEST(LossScaler, Bf16AndFp32UseAConstantScaleOfOne) {
  for (Precision p : {Precision::kFP32, Precision::kBF16}) {
    LossScaler s(p, scaling(65536, 2));
    EXPECT_FALSE(s.dynamic());
    EXPECT_FALSE(s.can_absorb_overflow());
    EXPECT_EQ(s.scale(), 1.0);
    s.update(true);
    s.update(false);
    s.update(false);
    s.update(false);
    EXPECT_EQ(s.scale(), 1.0);
    EXPECT_EQ(s.overflow_steps(), 1);
  }
}

TEST(LossScaler, StateRoundTripsThroughJson) {
  LossScaler a(Precision::kFP16, scaling(65536, 5, 3));
  a.update(true);
  a.update(true);
  a.update(true);  // halved once, hysteresis 3
  a.update(false);
  a.update(false);
  a.update(true);  // one overflow in a row pending
  LossScaler b(Precision::kFP16, scaling(65536, 5, 3));
  b.from_json(a.to_json(), "test");
  EXPECT_EQ(b.to_json(), a.to_json());
  // Both continue identically: two more overflows in a row lower the scale.
  for (LossScaler* s : {&a, &b}) {
    s->update(true);
    s->update(true);
  }
  EXPECT_EQ(a.scale(), 16384);
  EXPECT_EQ(b.scale(), 16384);
}

TEST(LossScaler, StateOfAnotherPrecisionStartsScalingAfresh) {
  LossScaler bf16(Precision::kBF16, scaling(65536, 5));
  bf16.update(true);
  LossScaler fp16(Precision::kFP16, scaling(65536, 5));
  fp16.from_json(bf16.to_json(), "test");
  EXPECT_EQ(fp16.scale(), 65536);       // not bf16's constant 1
  EXPECT_EQ(fp16.overflow_steps(), 1);  // the count carries over
}

TEST(LossScaler, MalformedStateIsAnErrorNamingTheOrigin) {
  LossScaler s(Precision::kFP16, scaling(65536, 5));
  try {
    s.from_json({{"dynamic", true}, {"scale", "big"}}, "ckpt/step_00000004");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ckpt/step_00000004"), std::string::npos) << e.what();
  }
  nlohmann::json negative = s.to_json();
  negative["scale"] = -1.0;
  EXPECT_THROW(s.from_json(negative, "x"), Error);
}

TEST(NonfiniteGuard, FiniteStepsApply) {
  NonfiniteGuard g(3);
  EXPECT_EQ(g.assess(true, true, false), StepVerdict::kApply);
  EXPECT_EQ(g.skipped_steps(), 0);
  EXPECT_EQ(g.streak(), 0);
}

TEST(NonfiniteGuard, OrdinaryFp16OverflowIsSkippedWithoutCountingTowardAStop) {
  NonfiniteGuard g(2);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(g.assess(true, false, true), StepVerdict::kSkip);
  EXPECT_EQ(g.streak(), 0);
  EXPECT_EQ(g.skipped_steps(), 5);
}

TEST(NonfiniteGuard, StopsAfterConsecutiveNonfiniteSteps) {
  NonfiniteGuard g(3);
  EXPECT_EQ(g.assess(false, false, true), StepVerdict::kSkip);   // non-finite loss: never "ordinary"
  EXPECT_EQ(g.assess(true, false, false), StepVerdict::kSkip);   // gradients scaling cannot absorb
  EXPECT_EQ(g.assess(true, true, false), StepVerdict::kApply);   // a good step ends the streak
  EXPECT_EQ(g.streak(), 0);
  EXPECT_EQ(g.assess(false, true, false), StepVerdict::kSkip);
  EXPECT_EQ(g.assess(false, false, false), StepVerdict::kSkip);
  EXPECT_EQ(g.streak(), 2);
  EXPECT_EQ(g.assess(false, false, false), StepVerdict::kStop);
  EXPECT_EQ(g.skipped_steps(), 5);
}

}  // namespace
}  // namespace moe4d
