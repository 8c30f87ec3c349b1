// bench/zero/zero_bench.cc — memory per rank under zero_stage 0..3 next to the ZeRO formulas
// (docs/zero.md) and the planner's prediction, and the data-parallel bytes each stage moves. Prints
// one JSON document (rank 0).
//
// usage: mpirun -np N zero_bench [--config=configs/tiny.yaml] [--stages=0,1,2,3] [--steps=2]
//                                [--seq=128] [--bucket-size=1000000 | --buckets=K] [--prefetch=2]
//                                [--layers=L] [--micro-batches=2]
//   The model of --config (with --layers layers if given) trains data-parallel over the N ranks
//   (data_parallel = N, one sequence of --seq tokens per micro-batch) on a synthetic token shard,
//   once per ZeRO stage, --steps steps each, with gradient buckets of --bucket-size elements
//   (parallel_config.grad_bucket_size) or --buckets buckets per group (gradient_aggregation_group)
//   and zero3_prefetch_buckets = --prefetch. Per stage and rank: the bytes of parameters, gradients
//   and AdamW state the trainer holds between steps (measured from its buffers) next to the formula
//   with this layout's padding and next to the paper's formula in the rank's parameter count Psi
//   (16 Psi, 8 Psi + 8 Psi/N, 4 Psi + 12 Psi/N, 16 Psi/N); the peaks during the step (ZeRO-3:
//   gathered buckets; ZeRO-2/3: gradient buckets in progress, measured with mincore) against that
//   steady-state formula and against the planner's peak (plan/memory_model.h: state + ZeRO-3 gather
//   + gradient bucket terms); the activation peak; and the process's resident set: the high-water
//   mark is reset before each stage (/proc/self/clear_refs) and large allocations are mmap'ed
//   (mallopt), so peak minus the baseline at the reset is that stage's own footprint.
#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../common/bench_args.h"
#include "../../tests/common/temp_dir.h"
#include "../common/bench_configs.h"
#include "../common/process_memory.h"
#include "comm/mpi/mpi_communicator.h"
#include "comm/mpi/mpi_runtime.h"
#include "config/config_loader.h"
#include "core/error.h"
#include "plan/memory_model.h"
#include "plan/model_source.h"
#include "train/trainer.h"

namespace {

using moe4d::Config;
using nlohmann::json;
using moe4d::bench::reset_peak_rss;
using moe4d::bench::status_bytes;

struct Args {
  std::string config = std::string(MOE4D_SOURCE_DIR) + "/configs/tiny.yaml";
  std::vector<int> stages = {0, 1, 2, 3};
  int steps = 2;
  int seq = 128;
  int64_t bucket_size = 1000000;
  int buckets = 0;
  int prefetch = 2;
  int layers = 0;
  int micro_batches = 2;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* key) { return moe4d::bench::flag_value(arg, key); };
    if (const char* v = value("--config=")) {
      a.config = v;
    } else if (const char* v = value("--stages=")) {
      a.stages.clear();
      for (const char* p = v; *p; ++p)
        if (*p >= '0' && *p <= '3') a.stages.push_back(*p - '0');
    } else if (const char* v = value("--steps=")) {
      a.steps = std::max(1, std::atoi(v));
    } else if (const char* v = value("--seq=")) {
      a.seq = std::max(8, std::atoi(v));
    } else if (const char* v = value("--buckets=")) {
      a.buckets = std::max(1, std::atoi(v));
      a.bucket_size = 0;
    } else if (const char* v = value("--bucket-size=")) {
      a.bucket_size = std::max<int64_t>(1, std::atoll(v));
      a.buckets = 0;
    } else if (const char* v = value("--prefetch=")) {
      a.prefetch = std::max(0, std::atoi(v));
    } else if (const char* v = value("--layers=")) {
      a.layers = std::max(1, std::atoi(v));
    } else if (const char* v = value("--micro-batches=")) {
      a.micro_batches = std::max(1, std::atoi(v));
    } else {
      std::fprintf(stderr, "zero_bench: unknown argument '%s'\n", arg.c_str());
      std::exit(2);
    }
  }
  return a;
}

// The planner's memory model for this run: one device of stage 0, fp32, no reserve.
moe4d::MemoryBreakdown planned(const Config& config, int ranks) {
  moe4d::Layout layout;
  layout.dp = ranks;
  layout.micro_batch_num = config.parallel.micro_batch_num;
  layout.zero_stage = config.parallel.zero_stage;
  moe4d::ClusterSpec cluster;
  cluster.memory_reserve_fraction = 0;
  const moe4d::TrainingSetup setup = moe4d::setup_from_config(config);
  return moe4d::stage_memory(config.model, setup, layout, cluster, 0, moe4d::stage_params(config.model, layout, 0));
}

json measure(const Config& config, moe4d::ParallelContext& pc, int steps) {
  const bool reset = reset_peak_rss();
  const double baseline = status_bytes("VmRSS:");
  json zero = json::array();
  json memory;
  double seconds = 0;
  {
    moe4d::Trainer trainer(config, pc, {.quiet = true, .metrics_path = "/dev/null"});
    for (int i = 0; i < steps; ++i) {
      const moe4d::StepResult r = trainer.train_step();
      memory = r.record["memory"];
      zero.push_back(r.record["zero"]);
      seconds += r.seconds / steps;
    }
  }
  const double peak = status_bytes("VmHWM:");
  // Every rank's RSS next to its trainer-reported numbers.
  const double mine[3] = {baseline, peak, reset ? 1.0 : 0.0};
  std::vector<double> all(3 * size_t(pc.world->size()));
  pc.world->all_gather(mine, all.data(), 3, moe4d::DType::kF64);

  const int n = pc.dp_ep->size();
  const moe4d::MemoryBreakdown plan = planned(config, n);
  const double plan_held = plan.weights + plan.gradients + plan.optimizer;
  const double plan_peak = plan_held + plan.zero3_gather + plan.grad_buckets;
  json ranks = json::array();
  for (int r = 0; r < pc.world->size(); ++r) {
    const json& m = memory["per_rank"][r];
    const double psi = m["local_params"].get<double>();
    const int stage = config.parallel.zero_stage;
    const double paper[4] = {16 * psi, 8 * psi + 8 * psi / n, 4 * psi + 12 * psi / n, 16 * psi / n};
    const double held = m["params_bytes"].get<double>() + m["grads_bytes"].get<double>() +
                        m["optimizer_bytes"].get<double>();
    const double formula = m["formula"]["params_bytes"].get<double>() + m["formula"]["grads_bytes"].get<double>() +
                           m["formula"]["optimizer_bytes"].get<double>();
    const double peak_state = m["params_peak_bytes"].get<double>() + m["grads_peak_bytes"].get<double>() +
                              m["optimizer_bytes"].get<double>();
    const double* rss = all.data() + 3 * size_t(r);
    ranks.push_back({{"rank", r},
                     {"params_psi", psi},
                     {"measured",
                      {{"params_bytes", m["params_bytes"]},
                       {"grads_bytes", m["grads_bytes"]},
                       {"optimizer_bytes", m["optimizer_bytes"]},
                       {"model_state_bytes", held},
                       {"params_peak_bytes", m["params_peak_bytes"]},
                       {"grads_peak_bytes", m["grads_peak_bytes"]},
                       {"model_state_peak_bytes", peak_state},
                       {"activations_peak_bytes", m["activations_peak_bytes"]},
                       {"peak_bytes", m["peak_bytes"]}}},
                     {"formula",
                      {{"params_bytes", m["formula"]["params_bytes"]},
                       {"grads_bytes", m["formula"]["grads_bytes"]},
                       {"optimizer_bytes", m["formula"]["optimizer_bytes"]},
                       {"model_state_bytes", formula},
                       {"paper_model_state_bytes", paper[stage]},
                       {"padding_bytes", formula - paper[stage]}}},
                     {"measured_over_formula", held / formula},
                     {"planner",
                      {{"model_state_bytes", plan_held},
                       {"zero3_gather_bytes", plan.zero3_gather},
                       {"grad_buckets_bytes", plan.grad_buckets},
                       {"model_state_peak_bytes", plan_peak}}},
                     {"peak_over_formula", peak_state / formula},
                     {"peak_over_planner_peak", peak_state / plan_peak},
                     {"rss",
                      {{"reset_worked", rss[2] != 0},
                       {"baseline_bytes", rss[0]},
                       {"peak_bytes", rss[1]},
                       {"stage_peak_bytes", rss[1] - rss[0]}}}});
  }
  return {{"zero_stage", config.parallel.zero_stage},
          {"step_s", seconds},
          {"grad_buckets_rank0", memory["grad_buckets"]},
          {"grad_bucket_elements_rank0", memory["grad_bucket_elements"]},
          {"data_parallel_group", n},
          {"per_rank", ranks},
          {"payload_per_step_rank0", zero.back()}};
}

}  // namespace

int main(int argc, char** argv) {
  moe4d::MpiRuntime mpi(&argc, &argv);
  const Args args = parse(argc, argv);
  const int ranks = mpi.world_size(), rank = mpi.world_rank();
  // Large buffers straight from mmap, returned on free: each stage's resident set starts clean.
  mallopt(M_MMAP_THRESHOLD, 64 * 1024);
  json out;
  const moe4d::test::TempDir dir("moe4d_zero_bench");
  try {
    Config base = moe4d::load_config(args.config);
    base.model.seq_length = args.seq;
    base.data.train = moe4d::bench::write_zipf_shard(dir.file("train.bin"), base.model.vocab_size, 200000);
    base.data.valid.clear();
    base.checkpoint.dir.clear();
    base.train.eval_interval = 0;
    base.train.steps = args.steps;
    base.parallel = moe4d::ParallelConfig{};
    base.parallel.data_parallel = ranks;
    base.parallel.micro_batch_num = args.micro_batches;
    if (args.layers > 0) base.model.num_layers = args.layers;
    base.parallel.gradient_aggregation_group = args.buckets;
    base.parallel.grad_bucket_size = args.bucket_size;
    base.parallel.zero3_prefetch_buckets = args.prefetch;
    base.parallel.collective_timeout = 600;
    base.train.global_batch_size = int64_t(ranks) * args.micro_batches;  // one sequence per micro-batch

    auto world = moe4d::MpiCommunicator::world(moe4d::CommOptions{.timeout_seconds = 600});
    auto pc = moe4d::make_parallel_context(std::move(world), base.parallel, 0);
    out = {{"benchmark", "zero_bench"},
           {"config", args.config},
           {"ranks", ranks},
           {"seq_length", args.seq},
           {"micro_batches", args.micro_batches},
           {"num_layers", base.model.num_layers},
           {"gradient_aggregation_group", args.buckets},
           {"grad_bucket_size", args.bucket_size},
           {"zero3_prefetch_buckets", args.prefetch},
           {"steps", args.steps},
           {"cores", sysconf(_SC_NPROCESSORS_ONLN)}};
    json stages = json::array();
    for (int stage : args.stages) {
      Config c = base;
      c.parallel.zero_stage = stage;
      stages.push_back(measure(c, *pc, args.steps));
    }
    out["stages"] = stages;
  } catch (const moe4d::Error& e) {
    std::fprintf(stderr, "zero_bench: error (rank %d): %s\n", rank, e.what());
    return 2;
  }
  if (rank == 0) std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
