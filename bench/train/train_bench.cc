// bench/train/train_bench.cc — one-rank training throughput of the "tiny" and "small" MoE configs,
// with one BLAS thread, as a fraction of this machine's measured single-thread sgemm peak.
//
// Model FLOPs per token follow model/model_flops.h (6 x matmul weights a token passes through + the
// causal attention term). Each config trains `steps` optimizer steps on a synthetic token shard
// after 2 warm-up steps; the median step time is reported, with the peak measured in the same run
// (machines are shared and noisy: compare ratios, not absolute numbers).
//
// Usage: train_bench [steps=6] [config names...]   Prints JSON on stdout. A name with the suffix
// "-bf16" (e.g. "small-bf16") trains that config with train.precision bf16.
#include <cblas.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../../tests/common/temp_dir.h"
#include "../common/bench_configs.h"
#include "kernels/gemm_probe.h"
#include "model/model_flops.h"
#include "train/trainer.h"

namespace moe4d {
namespace {

nlohmann::json run(const std::string& name, const std::string& shard, int steps, double peak) {
  const bool bf16 = name.size() > 5 && name.ends_with("-bf16");
  Config config = bench::bench_config(bf16 ? name.substr(0, name.size() - 5) : name, shard);
  if (bf16) config.train.precision = Precision::kBF16;
  auto pc = make_single_rank_context();
  Trainer trainer(config, *pc, {.quiet = true, .metrics_path = "/dev/null"});
  for (int i = 0; i < 2; ++i) trainer.train_step();
  std::vector<double> seconds;
  for (int i = 0; i < steps; ++i) seconds.push_back(trainer.train_step().seconds);
  std::sort(seconds.begin(), seconds.end());
  const double step_s = seconds[seconds.size() / 2];
  const double tokens = double(config.train.global_batch_size) * config.model.seq_length;
  const double gflops = tokens * model_flops_per_token(config.model) / step_s / 1e9;
  return {{"config", name},
          {"hidden", config.model.hidden_size},
          {"ffn", config.model.ffn_hidden_size},
          {"tokens_per_step", tokens},
          {"model_flops_per_token", model_flops_per_token(config.model)},
          {"median_step_s", step_s},
          {"best_step_s", seconds.front()},
          {"tokens_per_s", tokens / step_s},
          {"model_gflops_per_s", gflops},
          {"fraction_of_sgemm_peak", gflops / peak}};
}

}  // namespace
}  // namespace moe4d

int main(int argc, char** argv) {
  using namespace moe4d;
  openblas_set_num_threads(1);
  const int steps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 6;
  std::vector<std::string> names;
  for (int i = 2; i < argc; ++i) names.push_back(argv[i]);
  if (names.empty()) names = {"tiny", "small"};

  test::TempDir dir("moe4d-train-bench");
  const std::string shard = bench::write_bench_shard(dir.file("train.bin"));

  nlohmann::json doc;
  const double peak = sgemm_peak_gflops();
  doc["sgemm_peak_gflops"] = peak;
  doc["blas_threads"] = 1;
  for (const std::string& name : names) doc["configs"].push_back(run(name, shard, steps, peak));
  doc["sgemm_peak_gflops_after"] = sgemm_peak_gflops();  // the machine is shared: was it steady?
  std::printf("%s\n", doc.dump(2).c_str());
  return 0;
}
