// train/expert_rebalancer.cc — ExpertRebalancer (see the header).
#include "train/expert_rebalancer.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace moe4d {

ExpertRebalancer::ExpertRebalancer(const Config& config, ParallelContext& pc, Transformer& model,
                                   std::vector<int> moe_layers)
    : config_(config),
      pc_(pc),
      model_(model),
      moe_layers_(std::move(moe_layers)),
      active_(config.model.is_moe() && config.model.moe.redundant_experts > 0 && pc.ep_size() > 1) {}

void ExpertRebalancer::pack(const std::vector<MoeLayerStats>& stats, double* out) const {
  if (!active_) return;
  const size_t stride = this->stride(), ep = size_t(pc_.ep_size());
  for (const MoeLayerStats& s : stats) {
    const size_t slot = std::find(moe_layers_.begin(), moe_layers_.end(), s.layer) - moe_layers_.begin();
    double* at = out + slot * stride;
    for (size_t r = 0; r < s.rank_rows.size() && r < ep; ++r) at[r] = s.rank_rows[r];
    for (size_t r = 0; r < s.rank_rows_without.size() && r < ep; ++r) at[ep + r] = s.rank_rows_without[r];
    at[2 * ep] = s.replica_bytes;
    at[2 * ep + 1] = s.cross_node_rows;
    at[2 * ep + 2] = s.cross_node_rows_without;
  }
}

void ExpertRebalancer::rebalance(const std::vector<double>& load, int64_t step) {
  if (!active_) return;
  const int E = config_.model.moe.num_experts, ep = pc_.ep_size(), R = config_.model.moe.redundant_experts;
  if (placements_.empty()) {  // the placement every MoeBlock starts with
    placements_.assign(moe_layers_.size(), expert_placement_initial(E, ep, R));
    interval_load_.assign(moe_layers_.size(), std::vector<int64_t>(E, 0));
  }
  moved_slots_.assign(moe_layers_.size(), 0);
  for (size_t i = 0; i < moe_layers_.size(); ++i)
    for (int e = 0; e < E; ++e) interval_load_[i][e] += std::llround(load[i * E + e]);
  if (step % config_.model.moe.rebalance_interval != 0) return;
  for (size_t i = 0; i < moe_layers_.size(); ++i) {
    ExpertPlacement next = expert_placement_plan(interval_load_[i], E, ep, R, &placements_[i]);
    moved_slots_[i] = expert_placement_changed_slots(placements_[i], next);
    placements_[i] = std::move(next);
    std::fill(interval_load_[i].begin(), interval_load_[i].end(), 0);  // host bookkeeping
  }
  for (MoeBlock* block : model_.moe_blocks()) {
    const size_t i = std::find(moe_layers_.begin(), moe_layers_.end(), block->layer()) - moe_layers_.begin();
    if (!(*block->placement() == placements_[i])) block->set_placement(placements_[i]);
  }
}

void ExpertRebalancer::begin_step(const ParamStore& params, Backend& backend) {
  if (!active_) return;
  // ZeRO-3 holds the homes' values only around their layer: the layer's forward fetches then.
  const bool resident = config_.parallel.zero_stage < 3;
  for (MoeBlock* block : model_.moe_blocks()) {
    ExpertReplicas* replicas = block->replicas();
    if (!replicas) continue;
    replicas->take_moved_floats();  // an evaluation's fetch is not part of the next step's record
    replicas->invalidate();
    if (resident) replicas->prefetch(params, backend);
  }
}

double ExpertRebalancer::buffer_bytes() const {
  double bytes = 0;
  for (MoeBlock* block : model_.moe_blocks())
    if (ExpertReplicas* replicas = block->replicas()) bytes += double(replicas->buffer_bytes());
  return bytes;
}

void ExpertRebalancer::collect_replica_bytes(std::vector<MoeLayerStats>& stats) {
  if (!active_) return;
  for (MoeBlock* block : model_.moe_blocks()) {
    ExpertReplicas* replicas = block->replicas();
    if (!replicas) continue;
    const double bytes = double(sizeof(float)) * double(replicas->take_moved_floats());
    // This rank's bytes, for all TP ranks (only TP rank 0 contributes to the reduction).
    for (MoeLayerStats& s : stats)
      if (s.layer == block->layer()) s.replica_bytes = bytes * pc_.tp_size();
  }
}

nlohmann::json ExpertRebalancer::record(const double* reduced) const {
  const int ep = pc_.ep_size(), E = config_.model.moe.num_experts;
  const size_t stride = this->stride();
  const auto max_mean = [](const std::vector<double>& v) {
    const double mean = std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
    return mean > 0 ? *std::max_element(v.begin(), v.end()) / mean : 0.0;
  };
  nlohmann::json layers = nlohmann::json::array();
  for (size_t i = 0; i < moe_layers_.size(); ++i) {
    const double* at = reduced + i * stride;
    const std::vector<double> with(at, at + ep), without(at + ep, at + 2 * ep);
    // The placement the step ran with is the one before this step's rebalance: reported is the one
    // in force from the next step on, with what changed.
    const ExpertPlacement& p = placements_.empty() ? expert_placement_initial(E, ep, config_.model.moe.redundant_experts)
                                                   : placements_[i];
    std::vector<std::vector<int>> slots(ep);
    for (int r = 0; r < ep; ++r)
      for (int l = 0; l < p.slots_per_rank(); ++l) slots[r].push_back(p.expert_at(r, l));
    const int moved = moved_slots_.empty() ? 0 : moved_slots_[i];
    layers.push_back({{"layer", moe_layers_[i]},
                      {"rank_tokens", with},
                      {"rank_tokens_without", without},
                      {"max_mean", max_mean(with)},
                      {"max_mean_without", max_mean(without)},
                      {"replica_bytes", at[2 * ep]},
                      {"cross_node_rows", at[2 * ep + 1]},
                      {"cross_node_rows_without", at[2 * ep + 2]},
                      {"next_placement", slots},
                      {"replicas", p.replicas},
                      // Replica weights are fetched from their homes once per step (counted in
                      // replica_bytes) and carry no optimizer state, so a rebalance moves no extra
                      // bytes: the next fetch simply brings other experts into the moved slots.
                      {"moved_slots", moved}});
  }
  return {{"redundant_experts", config_.model.moe.redundant_experts},
          {"rebalance_interval", config_.model.moe.rebalance_interval},
          {"layers", layers}};
}

}  // namespace moe4d
