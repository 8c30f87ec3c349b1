// The expert placement (expert_placement/expert_placement.h) against brute force: on small shapes
// every assignment of experts to the replica slots is tried, and the plan's busiest EP rank must be
// within 10% of the best one and optimal in at least 3 of 4 cases (measured on these 420 cases:
// optimal in 332, worst 1.090; the bound is measured, not proven, docs/expert_replication.md). Plus the structural rules: homes stay, counts add up, the same
// inputs give the same placement, a current placement within 1/32 is kept.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "expert_placement/expert_placement.h"

namespace moe4d {
namespace {

double busiest(const std::vector<double>& loads) { return *std::max_element(loads.begin(), loads.end()); }

// Best busiest-rank load over every choice of replica experts on every rank, with the planner's rule
// that a rank holds at most one copy of an expert (its home experts included).
double brute_force_best(const std::vector<int64_t>& load, int experts, int ep, int redundant) {
  const int free_slots = redundant / ep, home = experts / ep;
  std::vector<std::vector<std::vector<int>>> choices(ep);  // per rank: increasing sequences of non-home experts
  std::vector<int> seq(free_slots, 0);
  for (int r = 0; r < ep; ++r) {
    std::function<void(int, int)> gen = [&](int pos, int from) {
      if (pos == free_slots) {
        choices[r].push_back(seq);
        return;
      }
      for (int e = from; e < experts; ++e) {
        if (e / home == r) continue;
        seq[pos] = e;
        gen(pos + 1, e + 1);
      }
    };
    gen(0, 0);
  }
  double best = 1e300;
  std::vector<int> pick(ep, 0);
  while (true) {
    std::vector<int> copies(experts, 1);
    for (int r = 0; r < ep; ++r)
      for (int e : choices[r][pick[r]]) ++copies[e];
    double worst = 0;
    for (int r = 0; r < ep; ++r) {
      double l = 0;
      for (int h = 0; h < home; ++h) l += double(load[r * home + h]) / copies[r * home + h];
      for (int e : choices[r][pick[r]]) l += double(load[e]) / copies[e];
      worst = std::max(worst, l);
    }
    best = std::min(best, worst);
    int r = 0;
    while (r < ep && ++pick[r] == int(choices[r].size())) pick[r++] = 0;
    if (r == ep) break;
  }
  return best;
}

struct Shape {
  int experts, ep, redundant;
};

void expect_well_formed(const ExpertPlacement& p) {
  ASSERT_EQ(p.slot_expert.size(), size_t(p.slots()));
  std::vector<int> copies(p.experts, 0);
  for (int r = 0; r < p.ep; ++r)
    for (int l = 0; l < p.slots_per_rank(); ++l) {
      const int e = p.expert_at(r, l);
      ASSERT_GE(e, 0);
      ASSERT_LT(e, p.experts);
      if (l < p.home_slots()) {
        EXPECT_EQ(e, r * p.home_slots() + l) << "home slots never move";
      }
      ++copies[e];
    }
  EXPECT_EQ(copies, p.replicas);
}

TEST(ExpertPlacement, WithinTenPercentOfBruteForceOnSmallShapes) {
  const Shape shapes[] = {{4, 2, 2}, {4, 2, 4}, {6, 2, 2}, {6, 3, 3}, {8, 2, 4}, {8, 4, 4}, {6, 3, 6}};
  std::mt19937_64 rng(7);
  double worst_ratio = 1.0;
  int optimal = 0, cases = 0;
  for (const Shape& s : shapes) {
    for (int trial = 0; trial < 60; ++trial) {
      std::vector<int64_t> load(s.experts);
      if (trial % 3 == 0) {  // Zipf over a random expert order
        std::vector<int> order(s.experts);
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), rng);
        for (int i = 0; i < s.experts; ++i) load[order[i]] = int64_t(std::llround(1000.0 / (i + 1)));
      } else if (trial % 3 == 1) {  // one hot expert at about 3x the mean
        for (auto& l : load) l = 100 + int64_t(rng() % 40);
        load[rng() % s.experts] = 100 * 3 * s.experts / (s.experts + 2);
      } else {
        for (auto& l : load) l = int64_t(rng() % 200);
      }
      const ExpertPlacement p = expert_placement_plan(load, s.experts, s.ep, s.redundant);
      expect_well_formed(p);
      const double got = busiest(expert_placement_rank_load(p, load));
      const double best = brute_force_best(load, s.experts, s.ep, s.redundant);
      const double ratio = best > 0 ? got / best : 1.0;
      ASSERT_LE(ratio, 1.10) << "E " << s.experts << " ep " << s.ep << " R " << s.redundant << ": "
                                         << p.describe();
      worst_ratio = std::max(worst_ratio, ratio);
      optimal += ratio <= 1.0 + 1e-6;
      ++cases;
    }
  }
  std::printf("placement vs brute force: %d of %d cases optimal, worst ratio %.4f\n", optimal, cases, worst_ratio);
  EXPECT_GE(optimal, cases * 3 / 4);  // measured: 332 of 420, worst 1.090
}

TEST(ExpertPlacement, HotExpertGetsReplicasAndTheBusiestRankDrops) {
  // 8 experts over EP4 with one expert at 3x the mean: without replicas its rank is the busiest.
  std::vector<int64_t> load(8, 100);
  load[1] = 300;
  const ExpertPlacement p = expert_placement_plan(load, 8, 4, 4);
  expect_well_formed(p);
  EXPECT_GE(p.replicas[1], 3);
  const double before = busiest(expert_home_rank_load(8, 4, load));
  const double after = busiest(expert_placement_rank_load(p, load));
  EXPECT_EQ(before, 400);
  EXPECT_LE(after, 0.7 * before) << p.describe();
}

TEST(ExpertPlacement, DeterministicAndStable) {
  std::vector<int64_t> load = {50, 400, 20, 90, 10, 10, 300, 60};
  const ExpertPlacement a = expert_placement_plan(load, 8, 2, 4);
  const ExpertPlacement b = expert_placement_plan(load, 8, 2, 4);
  EXPECT_EQ(a, b);
  // A slightly different load keeps the current placement (hysteresis) ...
  std::vector<int64_t> noisy = load;
  noisy[0] += 3;
  noisy[3] -= 2;
  EXPECT_EQ(expert_placement_plan(noisy, 8, 2, 4, &a), a);
  // ... a different hot spot moves replicas, and replicas that stay keep their local slot.
  std::vector<int64_t> moved = {400, 50, 20, 90, 10, 300, 10, 60};
  const ExpertPlacement c = expert_placement_plan(moved, 8, 2, 4, &a);
  expect_well_formed(c);
  EXPECT_GT(expert_placement_changed_slots(a, c), 0);
  EXPECT_GE(c.replicas[0], 2);
}

TEST(ExpertPlacement, InitialSpreadsReplicasOverExperts) {
  const ExpertPlacement p = expert_placement_initial(8, 4, 4);
  expect_well_formed(p);
  for (int e = 0; e < 8; ++e) EXPECT_LE(p.replicas[e], 2);
  for (int r = 0; r < 4; ++r)
    for (int l = p.home_slots(); l < p.slots_per_rank(); ++l)
      EXPECT_NE(p.home_rank(p.expert_at(r, l)), r) << "a replica on its own home rank is useless: " << p.describe();
  const ExpertPlacement none = expert_placement_initial(8, 4, 0);
  EXPECT_EQ(none.slots(), 8);
  EXPECT_EQ(none.replicas, std::vector<int>(8, 1));
}

}  // namespace
}  // namespace moe4d
