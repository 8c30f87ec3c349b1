// plan/replication_model.cc — the hot-expert load model and the replica slots' bytes (see the header).
#include "plan/replication_model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "config/layout_rules.h"
#include "expert_placement/expert_placement.h"

namespace moe4d {

std::string replication_problem(const ModelConfig& m, int ep, int redundant) {
  if (redundant <= 0 || ep <= 1) return "";
  const ReplicationFit fit = replication_fit(m, ep, redundant);  // config/layout_rules.h
  if (fit.uneven) return fmt::format("redundant_experts {} is not divisible by ep {}", redundant, ep);
  if (fit.too_many) return fmt::format("redundant_experts {} exceeds num_experts x (ep - 1) = {}", redundant, fit.most);
  return "";
}

std::vector<int64_t> hot_expert_load(const ModelConfig& m, double imbalance, int ep) {
  const int E = m.moe.num_experts;
  // Loads in units of 1/1000 of the mean expert load (integers for the placement).
  constexpr double kMean = 1000;
  const int local = E / ep;
  // Busiest device: hot h + (local - 1) at the mean; the rest share what is left equally.
  const double busiest = imbalance * local * kMean;
  const double cap = kMean * E / std::max(1, m.moe.top_k);  // all T tokens pick the hot expert
  const double h = std::min(cap, busiest - (local - 1) * kMean);
  const double rest = (E * kMean - h - (local - 1) * kMean) / std::max(1, E - local);
  std::vector<int64_t> load(E, std::llround(std::max(0.0, rest)));
  load[0] = std::llround(h);
  for (int e = 1; e < local; ++e) load[e] = std::llround(kMean);
  return load;
}

double imbalance_at_ep(const ModelConfig& m, double imbalance, int ep, int other_ep) {
  const int E = m.moe.num_experts;
  if (other_ep <= 1 || imbalance <= 1) return 1.0;
  const std::vector<double> ranks = expert_home_rank_load(E, other_ep, hot_expert_load(m, imbalance, ep));
  double total = 0;
  for (double r : ranks) total += r;
  return *std::max_element(ranks.begin(), ranks.end()) / (total / other_ep);
}

double replicated_imbalance(const ModelConfig& m, double imbalance, int ep, int redundant) {
  const int E = m.moe.num_experts;
  if (redundant <= 0 || ep <= 1 || !replication_problem(m, ep, redundant).empty() || imbalance <= 1) return imbalance;
  // A search asks for the same few (E, k, F, ep, R) thousands of times: memoised per thread (a pure
  // function of its key, so the cache changes no result).
  thread_local std::map<std::tuple<int, int, double, int, int>, double> memo;
  const auto key = std::make_tuple(E, m.moe.top_k, imbalance, ep, redundant);
  if (const auto it = memo.find(key); it != memo.end()) return it->second;
  const std::vector<int64_t> load = hot_expert_load(m, imbalance, ep);
  const ExpertPlacement p = expert_placement_plan(load, E, ep, redundant);
  const std::vector<double> ranks = expert_placement_rank_load(p, load);
  double total = 0;
  for (double r : ranks) total += r;
  return memo[key] = *std::max_element(ranks.begin(), ranks.end()) / (total / ep);
}

double replica_weight_bytes(const ModelConfig& m, const Layout& l, int redundant) {
  if (redundant <= 0 || l.ep <= 1 || !m.is_moe()) return 0;
  return 4.0 * 3.0 * m.hidden_size * (double(m.expert_ffn()) / l.tp) * (redundant / l.ep);
}

int replica_staging_slots(const ModelConfig& m, double imbalance, int ep, int redundant) {
  const int E = m.moe.num_experts;
  if (redundant <= 0 || ep <= 1 || !replication_problem(m, ep, redundant).empty()) return 0;
  thread_local std::map<std::tuple<int, int, double, int, int>, int> memo;  // as in replicated_imbalance
  const auto key = std::make_tuple(E, m.moe.top_k, imbalance, ep, redundant);
  if (const auto it = memo.find(key); it != memo.end()) return it->second;
  const ExpertPlacement p = imbalance > 1 ? expert_placement_plan(hot_expert_load(m, imbalance, ep), E, ep, redundant)
                                          : expert_placement_initial(E, ep, redundant);
  std::vector<int> staged(ep, 0);
  for (int r = 0; r < ep; ++r)
    for (int s = p.home_slots(); s < p.slots_per_rank(); ++s) ++staged[p.home_rank(p.expert_at(r, s))];
  return memo[key] = *std::max_element(staged.begin(), staged.end());
}

double replica_transfer_bytes(const ModelConfig& m, const Layout& l, int redundant) {
  const double returns = l.zero_stage >= 2 ? l.micro_batch_num : 1;
  return replica_weight_bytes(m, l, redundant) * (1 + returns) / std::max(1, l.micro_batch_num);
}

}  // namespace moe4d
