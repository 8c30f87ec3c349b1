// train/memory_report.cc — gather_rank_memory, memory_record, log_memory_table (see the header).
#include "train/memory_report.h"

#include <algorithm>
#include <type_traits>

#include "core/log.h"

namespace moe4d {
namespace {
double mib(double bytes) { return bytes / (1024.0 * 1024.0); }
constexpr size_t kFields = sizeof(RankMemoryUse) / sizeof(double);
static_assert(std::is_trivially_copyable_v<RankMemoryUse> && sizeof(RankMemoryUse) == kFields * sizeof(double));
}  // namespace

std::vector<RankMemoryUse> gather_rank_memory(Communicator& world, const RankMemoryUse& mine) {
  std::vector<RankMemoryUse> all(size_t(world.size()));
  world.all_gather(&mine, all.data(), kFields, DType::kF64);
  return all;
}

nlohmann::json memory_record(const std::vector<RankMemoryUse>& ranks, const ParallelConfig& parallel,
                             const ZeroLayout& layout) {
  nlohmann::json per_rank = nlohmann::json::array();
  RankMemoryUse most;  // the largest rank's peak per category: what a card must hold during a step
  double most_model_state = 0, most_peak = 0;
  for (const RankMemoryUse& m : ranks) {
    per_rank.push_back({{"params_bytes", m.params},
                        {"params_peak_bytes", m.params_peak},
                        {"grads_bytes", m.grads},
                        {"grads_peak_bytes", m.grads_peak},
                        {"optimizer_bytes", m.optimizer},
                        {"activations_peak_bytes", m.activations},
                        {"replica_bytes", m.replicas},
                        {"model_state_and_activations_bytes", m.model_state_and_activations()},
                        {"peak_bytes", m.peak()},
                        {"rss_peak_bytes", m.rss_peak},
                        {"formula",
                         {{"params_bytes", m.formula_params},
                          {"grads_bytes", m.formula_grads},
                          {"optimizer_bytes", m.formula_optimizer}}},
                        {"local_params", m.local_params}});
    most.params_peak = std::max(most.params_peak, m.params_peak);
    most.grads_peak = std::max(most.grads_peak, m.grads_peak);
    most.optimizer = std::max(most.optimizer, m.optimizer);
    most.activations = std::max(most.activations, m.activations);
    most.replicas = std::max(most.replicas, m.replicas);
    most_model_state = std::max(most_model_state, m.params_peak + m.grads_peak + m.optimizer);
    most_peak = std::max(most_peak, m.peak());
  }
  nlohmann::json bucket_elements = nlohmann::json::object();
  for (ParamGroup g : {ParamGroup::kDense, ParamGroup::kExpert})
    bucket_elements[g == ParamGroup::kDense ? "dense" : "expert"] = layout.bucket_elements(g);
  return {{"zero_stage", parallel.zero_stage},
          {"sequence_parallel", parallel.sequence_parallel},
          {"peak_params_bytes", most.params_peak},
          {"peak_grads_bytes", most.grads_peak},
          {"peak_optimizer_bytes", most.optimizer},
          {"peak_activations_bytes", most.activations},
          {"peak_model_state_bytes", most_model_state},
          {"peak_bytes", most_peak},
          {"peak_replica_bytes", most.replicas},
          {"grad_bucket_elements", bucket_elements},
          {"grad_buckets", layout.buckets().size()},
          {"zero3_prefetch_buckets", parallel.zero3_prefetch_buckets},
          {"per_rank", per_rank}};
}

void log_memory_table(const std::vector<RankMemoryUse>& ranks, int zero_stage) {
  log_info("model state per rank (zero_stage {}, MiB; formula of docs/zero.md in brackets):", zero_stage);
  log_info("  rank   params            grads             optimizer         total");
  const auto total = [&](size_t r) { return ranks[r].params + ranks[r].grads + ranks[r].optimizer; };
  // Every rank up to 16, else the rank with the largest total.
  std::vector<size_t> rows;
  if (ranks.size() <= 16) {
    for (size_t r = 0; r < ranks.size(); ++r) rows.push_back(r);
  } else {
    size_t worst = 0;
    for (size_t r = 1; r < ranks.size(); ++r)
      if (total(r) > total(worst)) worst = r;
    rows.push_back(worst);
  }
  for (size_t r : rows) {
    const RankMemoryUse& m = ranks[r];
    log_info("  {:>4}   {:>7.2f} [{:>7.2f}] {:>7.2f} [{:>7.2f}] {:>7.2f} [{:>7.2f}] {:>8.2f}", r, mib(m.params),
             mib(m.formula_params), mib(m.grads), mib(m.formula_grads), mib(m.optimizer), mib(m.formula_optimizer),
             mib(total(r)));
  }
}

}  // namespace moe4d
