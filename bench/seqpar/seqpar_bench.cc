// bench/seqpar/seqpar_bench.cc — what sequence parallelism (parallel_config.sequence_parallel)
// saves and costs: per layout, the same training without and with it. Prints one JSON document
// (world rank 0).
//
// usage: mpirun -np N seqpar_bench [--config=configs/tiny.yaml] [--steps=3] [--warmup=1] [--rounds=2]
//                                  [--seq=256] [--micro-batches=2]
//   Layouts of N ranks, each with TP >= 2: N = 2: tp2; N = 4: tp4, tp2 x dp2, tp2 x pp2 (1F1B),
//   tp2 x ep2; N = 8: tp4 x dp2, tp2 x pp4, tp4 x pp2, tp2 x ep2 x dp2. One sequence per
//   micro-batch, --micro-batches of them per data replica, on a synthetic Zipf token shard.
//   For every layout, SP off and on take turns for --rounds rounds (a fresh trainer each time,
//   --warmup unmeasured steps, then --steps measured): the median step time of each, their ratio,
//   and from the last round's metrics record
//     saved_activation_bytes  per stage: the peak of the activations kept for backward
//                             (pipeline.peak_activation_bytes, from the arenas);
//     activations_peak_bytes  the largest rank's saved + scratch peak (memory.peak_activations_bytes);
//     planned_activation_bytes per stage: the planner's activation model (plan/memory_model.h) for
//                             this layout in fp32, and measured / planned;
//     reduction               1 - with / without of the busiest stage's saved activations, against
//                             the planner's, and the bytes saved, measured over planned (the
//                             planner's saving is (1 - 1/t) of what lies outside the TP regions).
//   Every rank trains; with more ranks than cores the step times share the cores ("oversubscribed").
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "../common/bench_args.h"
#include "../../tests/common/temp_dir.h"
#include "../common/bench_configs.h"
#include "comm/mpi/mpi_communicator.h"
#include "comm/mpi/mpi_runtime.h"
#include "config/config_loader.h"
#include "core/error.h"
#include "plan/layout.h"
#include "plan/memory_model.h"
#include "plan/model_source.h"
#include "train/trainer.h"

namespace {

using moe4d::Config;
using nlohmann::json;

struct Args {
  std::string config = std::string(MOE4D_SOURCE_DIR) + "/configs/tiny.yaml";
  int steps = 3;
  int warmup = 1;
  int rounds = 2;
  int seq = 256;
  int micro_batches = 2;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* key) { return moe4d::bench::flag_value(arg, key); };
    if (const char* v = value("--config=")) a.config = v;
    else if (const char* v = value("--steps=")) a.steps = std::max(1, std::atoi(v));
    else if (const char* v = value("--warmup=")) a.warmup = std::max(0, std::atoi(v));
    else if (const char* v = value("--rounds=")) a.rounds = std::max(1, std::atoi(v));
    else if (const char* v = value("--seq=")) a.seq = std::max(8, std::atoi(v));
    else if (const char* v = value("--micro-batches=")) a.micro_batches = std::max(1, std::atoi(v));
    else {
      std::fprintf(stderr, "seqpar_bench: unknown argument '%s'\n", arg.c_str());
      std::exit(2);
    }
  }
  return a;
}

struct Dims {
  int dp = 1, ep = 1, tp = 2, pp = 1;
  int size() const { return dp * ep * tp * pp; }
  std::string name() const { return fmt::format("dp{} ep{} tp{} pp{}", dp, ep, tp, pp); }
};

std::vector<Dims> layouts_for(int ranks) {
  const std::vector<Dims> all = {{.tp = 2},
                                 {.tp = 4},
                                 {.dp = 2, .tp = 2},
                                 {.tp = 2, .pp = 2},
                                 {.ep = 2, .tp = 2},
                                 {.dp = 2, .tp = 4},
                                 {.tp = 2, .pp = 4},
                                 {.tp = 4, .pp = 2},
                                 {.dp = 2, .ep = 2, .tp = 2}};
  std::vector<Dims> out;
  for (const Dims& d : all)
    if (d.size() == ranks) out.push_back(d);
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Run {
  std::vector<double> step_seconds;
  json record;  // the last step's metrics record
};

Run train(const Config& config, int warmup, int steps) {
  auto world = moe4d::MpiCommunicator::world(moe4d::CommOptions{.timeout_seconds = 600});
  auto pc = moe4d::make_parallel_context(std::move(world), config.parallel, 0);
  moe4d::Trainer trainer(config, *pc, {.quiet = true, .metrics_path = "/dev/null"});
  Run run;
  for (int i = 0; i < warmup + steps; ++i) {
    moe4d::StepResult r = trainer.train_step();
    if (i >= warmup) run.step_seconds.push_back(r.seconds);
    run.record = std::move(r.record);
  }
  return run;
}

// The planner's saved activations of each stage of this run's layout (fp32, as the run).
std::vector<double> planned(const Config& config, int ranks) {
  const moe4d::Layout layout =
      moe4d::layout_from_parallel_config(config.parallel, config.train.global_batch_size, ranks);
  const moe4d::TrainingSetup setup = moe4d::setup_from_config(config);
  moe4d::ClusterSpec cluster;
  cluster.memory_reserve_fraction = 0;
  std::vector<double> out;
  for (int s = 0; s < layout.pp; ++s)
    out.push_back(moe4d::stage_memory(config.model, setup, layout, cluster, s,
                                      moe4d::stage_params(config.model, layout, s))
                      .activations);
  return out;
}

std::vector<double> as_doubles(const json& array) {
  std::vector<double> out;
  for (const json& v : array) out.push_back(v.get<double>());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  moe4d::MpiRuntime mpi(&argc, &argv);
  const Args args = parse(argc, argv);
  const int ranks = mpi.world_size(), rank = mpi.world_rank();
  const moe4d::test::TempDir dir("moe4d_seqpar_bench");
  json out;
  try {
    const std::vector<Dims> layouts = layouts_for(ranks);
    if (layouts.empty()) moe4d::fail("seqpar_bench runs on 2, 4 or 8 ranks (layouts with TP >= 2), not {}", ranks);
    Config base = moe4d::load_config(args.config);
    base.model.seq_length = args.seq;
    base.data.train = moe4d::bench::write_zipf_shard(dir.file("train.bin"), base.model.vocab_size, 200000);
    base.data.train_sources.clear();
    base.data.valid.clear();
    base.checkpoint.dir.clear();
    base.train.eval_interval = 0;
    base.train.steps = args.warmup + args.steps;
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    out = {{"benchmark", "seqpar_bench"},      {"config", args.config},   {"ranks", ranks},
           {"seq_length", args.seq},           {"steps", args.steps},     {"warmup", args.warmup},
           {"rounds", args.rounds},            {"cores", cores},          {"oversubscribed", ranks > cores},
           {"micro_batches", args.micro_batches}};
    json results = json::array();
    for (const Dims& dims : layouts) {
      Config c = base;
      c.parallel = moe4d::ParallelConfig{};
      c.parallel.data_parallel = dims.dp;
      c.parallel.expert_parallel = dims.ep;
      c.parallel.tensor_parallel = dims.tp;
      c.parallel.pipeline_parallel = dims.pp;
      c.parallel.micro_batch_num = std::max(args.micro_batches, dims.pp);
      c.parallel.collective_timeout = 600;
      c.train.global_batch_size = int64_t(dims.dp) * dims.ep * c.parallel.micro_batch_num;
      std::vector<double> seconds[2];
      json record[2];
      std::vector<double> plan[2];
      for (int round = 0; round < args.rounds; ++round)
        for (int sp = 0; sp < 2; ++sp) {
          c.parallel.sequence_parallel = sp == 1;
          Run run = train(c, args.warmup, args.steps);
          seconds[sp].insert(seconds[sp].end(), run.step_seconds.begin(), run.step_seconds.end());
          record[sp] = std::move(run.record);
          plan[sp] = planned(c, ranks);
        }
      json sides = json::object();
      double busiest[2] = {0, 0}, busiest_plan[2] = {0, 0};
      for (int sp = 0; sp < 2; ++sp) {
        const std::vector<double> saved = as_doubles(record[sp]["pipeline"]["peak_activation_bytes"]);
        json ratio = json::array();
        for (size_t s = 0; s < saved.size(); ++s) ratio.push_back(saved[s] / plan[sp][s]);
        busiest[sp] = *std::max_element(saved.begin(), saved.end());
        busiest_plan[sp] = *std::max_element(plan[sp].begin(), plan[sp].end());
        sides[sp ? "with_sp" : "without_sp"] = {
            {"step_seconds_median", median(seconds[sp])},
            {"step_seconds", seconds[sp]},
            {"saved_activation_bytes", saved},
            {"activations_peak_bytes", record[sp]["memory"]["peak_activations_bytes"]},
            {"planned_activation_bytes", plan[sp]},
            {"measured_over_planned", ratio},
            {"pipeline_transfer_peak_bytes", record[sp]["pipeline"]["peak_transfer_bytes"]}};
      }
      const double t0 = median(seconds[0]), t1 = median(seconds[1]);
      results.push_back({{"layout", dims.name()},
                         {"micro_batch_num", c.parallel.micro_batch_num},
                         {"sides", sides},
                         {"step_time_ratio_sp_over_no_sp", t0 > 0 ? t1 / t0 : 0.0},
                         {"reduction_measured", 1 - busiest[1] / busiest[0]},
                         {"reduction_planned", 1 - busiest_plan[1] / busiest_plan[0]},
                         // The planner's reduction is (1 - 1/t) of what lies outside the TP regions; the
                         // measured one should be at least 0.8 of it.
                         {"reduction_bytes_measured", busiest[0] - busiest[1]},
                         {"reduction_bytes_planned", busiest_plan[0] - busiest_plan[1]},
                         {"reduction_measured_over_planned", (busiest[0] - busiest[1]) / (busiest_plan[0] - busiest_plan[1])}});
    }
    out["layouts"] = results;
  } catch (const moe4d::Error& e) {
    std::fprintf(stderr, "seqpar_bench: error (rank %d): %s\n", rank, e.what());
    return 2;
  }
  if (rank == 0) std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
