// bench/scaling/scaling_bench.cc — data-parallel and tensor-parallel scaling of one training step.
//
// Run as `mpirun -np 2 scaling_bench [config=small] [steps=6]` (one rank per core, one BLAS thread
// each). Phases, all with the same global batch and the same micro-batches:
//   single        world rank 0 trains alone (the other rank waits) — the baseline tokens/s
//   dp2           DP2 with bucketed gradient reduction overlapped with backward
//   dp2_no_overlap  DP2, buckets reduced after backward
//   tp2           TP2
// For each: median step time, tokens/s, speed-up over single, and the data-parallel communication:
// busy seconds (start to completion of the bucket all-reduces) and exposed seconds (time the
// trainer sat waiting for them) — exposed / busy is the part of DP communication not hidden by
// compute. Prints one JSON document on rank 0.
#include <cblas.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../../tests/common/temp_dir.h"
#include "../common/bench_configs.h"
#include "comm/mpi/mpi_communicator.h"
#include "comm/mpi/mpi_runtime.h"
#include "train/trainer.h"

namespace moe4d {
namespace {

struct Phase {
  double median_step_s = 0;
  double tokens_per_s = 0;
  double dp_busy_s = 0, dp_exposed_s = 0, tp_busy_s = 0;  // per step, medians
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

Phase measure(const Config& config, ParallelContext& pc, int steps) {
  Trainer trainer(config, pc, {.quiet = true, .metrics_path = "/dev/null"});
  for (int i = 0; i < 2; ++i) trainer.train_step();  // warm-up: arenas sized, pages touched
  std::vector<double> step_s, dp_busy, dp_exposed, tp_busy;
  for (int i = 0; i < steps; ++i) {
    const StepResult r = trainer.train_step();
    step_s.push_back(r.seconds);
    const auto& comm = r.record["time"]["comm"];
    dp_busy.push_back(comm["dp"]["busy_s"].get<double>());
    dp_exposed.push_back(comm["dp"]["exposed_s"].get<double>());
    tp_busy.push_back(comm["tp"]["busy_s"].get<double>());
  }
  Phase p;
  p.median_step_s = median(step_s);
  p.tokens_per_s = double(config.train.global_batch_size) * config.model.seq_length / p.median_step_s;
  p.dp_busy_s = median(dp_busy);
  p.dp_exposed_s = median(dp_exposed);
  p.tp_busy_s = median(tp_busy);
  return p;
}

nlohmann::json to_json(const Phase& p, double baseline) {
  nlohmann::json j = {{"median_step_s", p.median_step_s},
                      {"tokens_per_s", p.tokens_per_s},
                      {"speedup_vs_single", baseline > 0 ? p.tokens_per_s / baseline : 0.0},
                      {"dp_comm_busy_s", p.dp_busy_s},
                      {"dp_comm_exposed_s", p.dp_exposed_s},
                      {"tp_comm_busy_s", p.tp_busy_s}};
  if (p.dp_busy_s > 0) j["dp_exposed_fraction"] = p.dp_exposed_s / p.dp_busy_s;
  return j;
}

}  // namespace
}  // namespace moe4d

int main(int argc, char** argv) {
  using namespace moe4d;
  MpiRuntime mpi(&argc, &argv);
  openblas_set_num_threads(1);
  const std::string name = argc > 1 ? argv[1] : "small";
  const int steps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 6;
  if (mpi.world_size() != 2) {
    if (mpi.world_rank() == 0) std::fprintf(stderr, "scaling_bench: run with mpirun -np 2\n");
    return 2;
  }
  test::TempDir dir("moe4d-scaling-bench");
  Config base = bench::bench_config(name, bench::write_bench_shard(dir.file("train.bin")));
  base.parallel.micro_batch_num = 1;

  auto world = [] { return MpiCommunicator::world(CommOptions{.timeout_seconds = 600}); };
  Phase single;
  {
    auto w = world();
    if (w->rank() == 0) {
      Config c = base;
      c.parallel.micro_batch_num = 2;  // the same two micro-batches of 4 sequences as DP2
      auto local = make_single_rank_context();
      single = measure(c, *local, steps);
    }
    w->barrier();
  }
  auto run = [&](int dp, int tp, bool overlap) {
    Config c = base;
    c.parallel.data_parallel = dp;
    c.parallel.tensor_parallel = tp;
    c.parallel.micro_batch_num = tp == 2 ? 2 : 1;
    c.parallel.overlap_grad_reduce = overlap;
    auto pc = make_parallel_context(world(), c.parallel, 0);
    return measure(c, *pc, steps);
  };
  const Phase dp2 = run(2, 1, true);
  const Phase dp2_serial = run(2, 1, false);
  const Phase tp2 = run(1, 2, true);

  if (mpi.world_rank() == 0) {
    nlohmann::json doc = {{"config", name},
                          {"ranks", 2},
                          {"blas_threads_per_rank", 1},
                          {"global_batch", base.train.global_batch_size},
                          {"single", to_json(single, single.tokens_per_s)},
                          {"dp2", to_json(dp2, single.tokens_per_s)},
                          {"dp2_no_overlap", to_json(dp2_serial, single.tokens_per_s)},
                          {"tp2", to_json(tp2, single.tokens_per_s)}};
    std::printf("%s\n", doc.dump(2).c_str());
  }
  return 0;
}
