// tests/kernels/moe_dispatch_test.cc — moe_route_plan vs a naive reference (dropless and with capacity),
// permute/unpermute vs naive loops, and finite differences of the whole local MoE combine.
#include "kernels/moe_dispatch.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>
#include <limits>
#include <numeric>
#include <tuple>

#include "kernel_test_util.h"
#include "kernels/gemm.h"

namespace moe4d {
namespace {

struct Plan {
  std::vector<int> offsets, row_slot, slot_row;
  int kept = 0;
};

// The contract spelled out directly: per expert, its slots by (weight desc, slot asc), keep the first
// `capacity`, then list the kept ones by slot.
Plan plan_reference(const std::vector<int>& idx, const std::vector<float>& w, int experts, int capacity) {
  Plan plan;
  plan.slot_row.assign(idx.size(), -1);
  plan.offsets.push_back(0);
  for (int e = 0; e < experts; ++e) {
    std::vector<int> slots;
    for (size_t s = 0; s < idx.size(); ++s)
      if (idx[s] == e) slots.push_back(static_cast<int>(s));
    std::stable_sort(slots.begin(), slots.end(), [&](int a, int b) { return w[a] > w[b]; });
    if (capacity >= 0 && static_cast<int>(slots.size()) > capacity) slots.resize(capacity);
    std::sort(slots.begin(), slots.end());
    for (int s : slots) {
      plan.slot_row[s] = static_cast<int>(plan.row_slot.size());
      plan.row_slot.push_back(s);
    }
    plan.offsets.push_back(static_cast<int>(plan.row_slot.size()));
  }
  plan.kept = static_cast<int>(plan.row_slot.size());
  return plan;
}

Plan plan_kernel(const std::vector<int>& idx, const std::vector<float>& w, int tokens, int experts, int k,
                 int capacity) {
  Plan plan;
  plan.offsets.assign(experts + 1, -7);
  plan.row_slot.assign(idx.size(), -7);
  plan.slot_row.assign(idx.size(), -7);
  std::vector<int> scratch(idx.size(), -7);
  plan.kept = moe_route_plan(plan.offsets.data(), plan.row_slot.data(), plan.slot_row.data(), scratch.data(),
                             idx.data(), w.data(), tokens, experts, k, capacity);
  plan.row_slot.resize(plan.kept);
  return plan;
}

// k distinct experts per token, drawn at random; weights quantised to a few values so ties happen.
void random_routing(int tokens, int experts, int k, uint64_t seed, std::vector<int>* idx, std::vector<float>* w) {
  CounterRng rng(seed);
  idx->clear();
  w->clear();
  for (int t = 0; t < tokens; ++t) {
    std::vector<int> perm(experts);
    std::iota(perm.begin(), perm.end(), 0);
    for (int i = experts - 1; i > 0; --i) std::swap(perm[i], perm[rng.next_u64() % (i + 1)]);
    for (int j = 0; j < k; ++j) {
      idx->push_back(perm[j]);
      w->push_back(0.125f * static_cast<float>(1 + rng.next_u64() % 4));
    }
  }
}

void expect_same_plan(const Plan& got, const Plan& want, const std::string& what) {
  EXPECT_EQ(got.kept, want.kept) << what;
  EXPECT_EQ(got.offsets, want.offsets) << what;
  EXPECT_EQ(got.row_slot, want.row_slot) << what;
  EXPECT_EQ(got.slot_row, want.slot_row) << what;
}

TEST(MoeRoutePlan, MatchesReferenceWithAndWithoutCapacity) {
  for (auto [tokens, experts, k] : {std::tuple{1, 1, 1}, std::tuple{9, 4, 2}, std::tuple{40, 8, 2},
                                    std::tuple{33, 6, 3}, std::tuple{5, 12, 2}}) {
    std::vector<int> idx;
    std::vector<float> w;
    random_routing(tokens, experts, k, 70 + tokens, &idx, &w);
    for (int capacity : {-1, 0, 1, 2, 5, tokens * k}) {
      const std::string what = fmt::format("T {} E {} k {} capacity {}", tokens, experts, k, capacity);
      expect_same_plan(plan_kernel(idx, w, tokens, experts, k, capacity), plan_reference(idx, w, experts, capacity),
                       what);
    }
  }
}

TEST(MoeRoutePlan, ExpertWithAllTokensAndExpertWithNone) {
  // Every token sends its pick 1 (or pick 0 for odd tokens) to expert 0; expert 3 gets nothing.
  const int tokens = 10, experts = 4, k = 2;
  std::vector<int> idx;
  std::vector<float> w;
  for (int t = 0; t < tokens; ++t) {
    const int other = 1 + t % 2;
    idx.insert(idx.end(), t % 2 ? std::initializer_list<int>{0, other} : std::initializer_list<int>{other, 0});
    const float w0 = 0.1f * static_cast<float>(t % 5), w_other = 1.0f - w0;  // ties between tokens t and t+5
    w.insert(w.end(), t % 2 ? std::initializer_list<float>{w0, w_other} : std::initializer_list<float>{w_other, w0});
  }
  const Plan dropless = plan_kernel(idx, w, tokens, experts, k, -1);
  expect_same_plan(dropless, plan_reference(idx, w, experts, -1), "dropless");
  EXPECT_EQ(dropless.offsets, (std::vector<int>{0, 10, 15, 20, 20}));
  const Plan capped = plan_kernel(idx, w, tokens, experts, k, 3);
  expect_same_plan(capped, plan_reference(idx, w, experts, 3), "capacity 3");
  // Expert 0 keeps the three highest weights 0.4 (tokens 4, 9) and 0.3 (tokens 3, 8 tie: 3 is kept).
  const std::vector<int> kept_slots(capped.row_slot.begin(), capped.row_slot.begin() + 3);
  EXPECT_EQ(kept_slots, (std::vector<int>{3 * 2 + 0, 4 * 2 + 1, 9 * 2 + 0}));
  EXPECT_EQ(capped.offsets, (std::vector<int>{0, 3, 6, 9, 9}));
}

// x -> permute -> per-expert linear (W_e: [d, d_out]) -> unpermute with topk_w, in double, with the
// plan's kept set held fixed.
std::vector<double> moe_reference(const std::vector<double>& x, const std::vector<double>& w_experts,
                                  const std::vector<double>& topk_w, const std::vector<int>& idx, const Plan& plan,
                                  int tokens, int k, int d, int d_out) {
  std::vector<double> out(static_cast<size_t>(tokens) * d_out, 0.0);
  for (int t = 0; t < tokens; ++t)
    for (int j = 0; j < k; ++j) {
      const int s = t * k + j;
      if (plan.slot_row[s] < 0) continue;
      const double* w = &w_experts[static_cast<size_t>(idx[s]) * d * d_out];
      for (int o = 0; o < d_out; ++o) {
        double y = 0.0;
        for (int i = 0; i < d; ++i) y += x[t * d + i] * w[i * d_out + o];
        out[t * d_out + o] += topk_w[s] * y;
      }
    }
  return out;
}

TEST(MoeDispatch, LocalCombineForwardAndBackwardWithCapacityDropping) {
  const int tokens = 12, experts = 4, k = 2, d = 5, d_out = 3;
  std::vector<int> idx;
  std::vector<float> topk_w;
  random_routing(tokens, experts, k, 80, &idx, &topk_w);
  for (size_t s = 0; s < topk_w.size(); ++s) topk_w[s] += 0.01f * static_cast<float>(s);  // distinct weights
  auto x = test::random_normal(static_cast<size_t>(tokens) * d, 81);
  auto w_experts = test::random_normal(static_cast<size_t>(experts) * d * d_out, 82, 0.5f);
  auto r = test::random_normal(static_cast<size_t>(tokens) * d_out, 83);

  for (int capacity : {-1, 4}) {
    const Plan plan = plan_kernel(idx, topk_w, tokens, experts, k, capacity);
    if (capacity >= 0) {
      ASSERT_LT(plan.kept, tokens * k) << "the capacity case must drop something";
    }
    // Forward through the kernels.
    std::vector<float> xp(static_cast<size_t>(plan.kept) * d), yp(static_cast<size_t>(plan.kept) * d_out);
    moe_permute_forward(xp.data(), x.data(), plan.row_slot.data(), plan.kept, k, d);
    for (int e = 0; e < experts; ++e) {
      const int r0 = plan.offsets[e], rows = plan.offsets[e + 1] - r0;
      matmul_forward(yp.data() + static_cast<size_t>(r0) * d_out, xp.data() + static_cast<size_t>(r0) * d,
                     w_experts.data() + static_cast<size_t>(e) * d * d_out, rows, d, d_out);
    }
    std::vector<float> out(static_cast<size_t>(tokens) * d_out, std::numeric_limits<float>::quiet_NaN());
    moe_unpermute_forward(out.data(), yp.data(), plan.slot_row.data(), topk_w.data(), tokens, k, d_out);
    const auto xd = test::to_double(x), wd = test::to_double(w_experts), twd = test::to_double(topk_w);
    test::expect_values_near(out.data(), moe_reference(xd, wd, twd, idx, plan, tokens, k, d, d_out), 1e-5,
                             "moe combine forward");

    // Backward through the kernels.
    std::vector<float> dyp(yp.size(), std::numeric_limits<float>::quiet_NaN()), dtopk_w(topk_w.size(), 99.0f);
    moe_unpermute_backward(dyp.data(), dtopk_w.data(), r.data(), yp.data(), plan.slot_row.data(), topk_w.data(),
                           tokens, k, d_out);
    std::vector<float> dxp(xp.size()), dw(w_experts.size(), 0.0f), dx(x.size(), 0.0f);
    for (int e = 0; e < experts; ++e) {
      const int r0 = plan.offsets[e], rows = plan.offsets[e + 1] - r0;
      matmul_backward(dxp.data() + static_cast<size_t>(r0) * d, dw.data() + static_cast<size_t>(e) * d * d_out,
                      dyp.data() + static_cast<size_t>(r0) * d_out, xp.data() + static_cast<size_t>(r0) * d,
                      w_experts.data() + static_cast<size_t>(e) * d * d_out, rows, d, d_out, false);
    }
    moe_permute_backward(dx.data(), dxp.data(), plan.row_slot.data(), plan.kept, k, d);

    auto loss = [&](const std::vector<double>& xv, const std::vector<double>& wv, const std::vector<double>& tv) {
      return test::dot(moe_reference(xv, wv, tv, idx, plan, tokens, k, d, d_out), r);
    };
    const std::string what = capacity < 0 ? " (dropless)" : " (capacity)";
    test::expect_grad_near(dx.data(), test::fd_gradient([&](const auto& v) { return loss(v, wd, twd); }, xd), 1e-4,
                           "dx" + what);
    test::expect_grad_near(dw.data(), test::fd_gradient([&](const auto& v) { return loss(xd, v, twd); }, wd), 1e-4,
                           "dW" + what);
    test::expect_grad_near(dtopk_w.data(), test::fd_gradient([&](const auto& v) { return loss(xd, wd, v); }, twd),
                           1e-4, "dtopk_w" + what);
    for (size_t s = 0; s < idx.size(); ++s)
      if (plan.slot_row[s] < 0) {
        EXPECT_EQ(dtopk_w[s], 0.0f) << "dropped slot " << s;
      }
  }
}

TEST(MoeDispatch, PermuteAccumulatesIntoDx) {
  const int tokens = 4, k = 2, d = 3;
  const std::vector<int> row_slot = {5, 0, 2, 7, 1};  // slots of tokens 2, 0, 1, 3, 0
  auto x = test::random_normal(static_cast<size_t>(tokens) * d, 90);
  std::vector<float> xp(row_slot.size() * d);
  moe_permute_forward(xp.data(), x.data(), row_slot.data(), 5, k, d);
  for (int r = 0; r < 5; ++r)
    for (int c = 0; c < d; ++c) EXPECT_EQ(xp[r * d + c], x[row_slot[r] / k * d + c]);
  auto dxp = test::random_normal(xp.size(), 91);
  std::vector<float> dx(x.size(), 1.0f);
  moe_permute_backward(dx.data(), dxp.data(), row_slot.data(), 5, k, d);
  for (int c = 0; c < d; ++c) {
    EXPECT_FLOAT_EQ(dx[0 * d + c], 1.0f + dxp[1 * d + c] + dxp[4 * d + c]);
    EXPECT_FLOAT_EQ(dx[1 * d + c], 1.0f + dxp[2 * d + c]);
    EXPECT_FLOAT_EQ(dx[2 * d + c], 1.0f + dxp[0 * d + c]);
    EXPECT_FLOAT_EQ(dx[3 * d + c], 1.0f + dxp[3 * d + c]);
  }
}

}  // namespace
}  // namespace moe4d
