// bench/plan/plan_search_bench.cc — how long the full `moe4d plan` search takes at scale.
//
// The bar: the full search for a 1-trillion-parameter MoE on 4096 devices in under 0.5 s on
// one core (the search is single-threaded). Runs the moe-1t preset on 4096 devices of each cluster
// preset, plus the articles' 120B MoE on 64 cards, `repeats` times each (argv[1], default 5), and
// prints one JSON document: per case the best/median wall seconds, the splits, variants and timed
// (variant, rank order) pairs, and the best layout found.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "plan/cluster_presets.h"
#include "plan/model_presets.h"
#include "plan/search.h"

namespace {

nlohmann::json run_case(const std::string& model, const std::string& cluster, int devices, int repeats) {
  const moe4d::ModelPreset preset = moe4d::model_preset(model);
  const moe4d::PlanContext ctx{model, preset.model, preset.setup,
                               moe4d::cluster_with_devices(moe4d::cluster_preset(cluster), devices)};
  std::vector<double> seconds;
  moe4d::SearchResult last;
  for (int i = 0; i < repeats; ++i) {
    last = moe4d::search_layouts(ctx, moe4d::SearchSpace{}, 10);
    seconds.push_back(last.seconds);
  }
  std::sort(seconds.begin(), seconds.end());
  nlohmann::json out = {{"model", model},
                        {"cluster", cluster},
                        {"devices", devices},
                        {"repeats", repeats},
                        {"seconds_min", seconds.front()},
                        {"seconds_median", seconds[seconds.size() / 2]},
                        {"splits", last.factorizations},
                        {"candidates_evaluated", last.candidates},
                        {"candidates_fitting", last.admitted},
                        {"timed_with_rank_orders", last.timed},
                        {"rejected_splits", last.rejected.size()}};
  if (!last.ranked.empty()) {
    out["best_layout"] = moe4d::layout_to_string(last.ranked.front().layout);
    out["best_step_seconds"] = last.ranked.front().time.step;
    out["best_tokens_per_second"] = last.ranked.front().tokens_per_second;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  nlohmann::json cases = nlohmann::json::array();
  for (const char* cluster : {"dgx-h100", "atlas-800t-a2", "dgx-a100"}) cases.push_back(run_case("moe-1t", cluster, 4096, repeats));
  cases.push_back(run_case("deepseek-v3-like", "dgx-h200", 2048, repeats));
  cases.push_back(run_case("moe-120b", "atlas-800t-a2", 64, repeats));
  double worst = 0;
  for (const auto& c : cases)
    if (c["model"] == "moe-1t") worst = std::max(worst, c["seconds_median"].get<double>());
  const nlohmann::json doc = {{"benchmark", "plan_search"},
                              {"target", "moe-1t on 4096 devices in under 0.5 s on one core"},
                              {"moe_1t_4096_worst_median_seconds", worst},
                              {"cases", cases}};
  std::printf("%s\n", doc.dump(2).c_str());
  return 0;
}
