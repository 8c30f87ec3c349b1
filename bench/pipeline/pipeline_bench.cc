// bench/pipeline/pipeline_bench.cc — the pipeline bubble as measured by moe4d next to the formula,
// and the throughput cost of activation recompute. Prints one JSON document (world rank 0).
//
// usage: mpirun -np P pipeline_bench [--config=configs/tiny.yaml] [--micro-batches=2,8,16]
//                                    [--schedules=gpipe,1f1b,interleaved] [--steps=3] [--warmup=1]
//                                    [--recompute-micro-batches=8] [--rounds=3] [--no-recompute]
//                                    [--num-layers=N] [--stage-layers=a,b,...]
//   The model of --config (default: the "tiny" MoE) trains with pipeline_parallel = P (no DP/TP/EP),
//   one sequence per micro-batch, on a synthetic token shard. For every schedule and micro_batch_num m
//   (m < P is refused by moe4d, interleaved needs m % P == 0 and layers % 2P == 0, virtual_pipeline 2):
//   `warmup` unmeasured steps, then the mean over `steps` steps of the trainer's own metrics record:
//   bubble_measured (mean over stages of idle / pipeline span), the formula ((p-1)/v)/(m+(p-1)/v),
//   and bubble_replayed, the schedule replayed with the step's measured per-chunk forward / backward
//   times and free communication, which accounts for unequal stages (the last one also runs the
//   head and the loss) — what is left between that and the measurement is stage-to-stage
//   communication, synchronisation and interference from other processes.
//   Recompute: 1F1B with --recompute-micro-batches, none vs full vs selective taking turns for
//   --rounds rounds: median tokens/s, the cost relative to none, the measured peak activation memory
//   per stage. Works with -np 1 too (no pipeline: the recompute cost alone).
//   --num-layers / --stage-layers change the model's depth and give the stages explicit layer counts,
//   e.g. --num-layers=5 --stage-layers=3,2 for P = 2, where the second stage's head and loss weigh
//   about one layer: equal stages, the formula's assumption (interleaved is then skipped: its
//   chunks are equal by construction).
//   With more ranks than cores (P = 4 on 2 cores) stages share cores: the "oversubscribed" flag says so.

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "../common/bench_args.h"
#include "../../tests/common/temp_dir.h"
#include "../common/bench_configs.h"
#include "comm/mpi/mpi_communicator.h"
#include "comm/mpi/mpi_runtime.h"
#include "config/config_loader.h"
#include "core/error.h"
#include "train/pipeline_schedule.h"
#include "train/trainer.h"

namespace {

using moe4d::Config;
using moe4d::PipelineSchedule;
using moe4d::RecomputeGranularity;
using nlohmann::json;

struct Args {
  std::string config = std::string(MOE4D_SOURCE_DIR) + "/configs/tiny.yaml";
  std::vector<int> micro_batches = {2, 8, 16};
  std::vector<std::string> schedules = {"gpipe", "1f1b", "interleaved"};
  int steps = 3;
  int warmup = 1;
  int recompute_micro_batches = 8;
  int rounds = 3;
  int num_layers = 0;             // > 0: overrides the config's model.num_layers
  std::vector<int> stage_layers;  // explicit layers per stage (balances the head's extra work)
  bool recompute = true;
};

std::vector<std::string> split(const char* text) {
  std::vector<std::string> out;
  std::string item;
  for (const char* p = text;; ++p) {
    if (*p == ',' || *p == '\0') {
      if (!item.empty()) out.push_back(item);
      item.clear();
      if (*p == '\0') break;
    } else {
      item += *p;
    }
  }
  return out;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char* key) { return moe4d::bench::flag_value(arg, key); };
    if (const char* v = value("--config=")) {
      a.config = v;
    } else if (const char* v = value("--micro-batches=")) {
      a.micro_batches.clear();
      for (const std::string& s : split(v)) a.micro_batches.push_back(std::max(1, std::stoi(s)));
    } else if (const char* v = value("--schedules=")) {
      a.schedules = split(v);
    } else if (const char* v = value("--steps=")) {
      a.steps = std::max(1, std::atoi(v));
    } else if (const char* v = value("--warmup=")) {
      a.warmup = std::max(0, std::atoi(v));
    } else if (const char* v = value("--recompute-micro-batches=")) {
      a.recompute_micro_batches = std::max(1, std::atoi(v));
    } else if (const char* v = value("--num-layers=")) {
      a.num_layers = std::max(1, std::atoi(v));
    } else if (const char* v = value("--stage-layers=")) {
      for (const std::string& s : split(v)) a.stage_layers.push_back(std::stoi(s));
    } else if (const char* v = value("--rounds=")) {
      a.rounds = std::max(1, std::atoi(v));
    } else if (arg == "--no-recompute") {
      a.recompute = false;
    } else {
      std::fprintf(stderr, "pipeline_bench: unknown argument '%s'\n", arg.c_str());
      std::exit(2);
    }
  }
  return a;
}

PipelineSchedule schedule_of(const std::string& name) {
  if (name == "gpipe") return PipelineSchedule::kGPipe;
  if (name == "1f1b") return PipelineSchedule::k1F1B;
  if (name == "interleaved") return PipelineSchedule::kInterleaved;
  moe4d::fail("pipeline_bench: unknown schedule '{}', expected gpipe, 1f1b or interleaved", name);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / double(v.size());
}

// Runs `warmup` + `steps` steps and averages the measured steps' pipeline records.
json measure(const Config& config, moe4d::ParallelContext& pc, const Args& args) {
  moe4d::Trainer trainer(config, pc, {.resume_from = {}, .exit_after = 0, .quiet = true, .metrics_path = "/dev/null"});
  for (int i = 0; i < args.warmup; ++i) trainer.train_step();
  const int p = config.parallel.pipeline_parallel;
  std::vector<double> step_s, bubble, replayed, span, busy(p, 0.0), idle(p, 0.0), wait(p, 0.0);
  std::vector<double> peak(p, 0.0);
  for (int i = 0; i < args.steps; ++i) {
    const moe4d::StepResult r = trainer.train_step();
    const json& pipe = r.record["pipeline"];
    step_s.push_back(r.seconds);
    bubble.push_back(pipe["bubble_measured"].get<double>());
    replayed.push_back(pipe["bubble_replayed"].get<double>());
    span.push_back(pipe["span_s"].get<double>());
    for (int s = 0; s < p; ++s) {
      busy[s] += pipe["busy_s"][s].get<double>() / args.steps;
      idle[s] += pipe["idle_s"][s].get<double>() / args.steps;
      wait[s] += pipe["recv_wait_s"][s].get<double>() / args.steps;
      peak[s] = std::max(peak[s], pipe["peak_activation_bytes"][s].get<double>());
    }
  }
  const int m = config.parallel.micro_batch_num;
  const bool interleaved = config.parallel.pipeline_schedule == PipelineSchedule::kInterleaved;
  const int v = interleaved ? config.parallel.virtual_pipeline : 1;
  const double tokens = double(config.train.global_batch_size) * config.model.seq_length;
  const double formula = moe4d::pipeline_bubble_formula(p, m, v);
  return {{"schedule", moe4d::pipeline_schedule_name(config.parallel.pipeline_schedule)},
          {"virtual_pipeline", v},
          {"micro_batches", m},
          {"bubble_measured", mean(bubble)},
          {"bubble_formula", formula},
          {"difference_points", 100 * (mean(bubble) - formula)},
          {"bubble_replayed", mean(replayed)},
          {"unexplained_points", 100 * (mean(bubble) - mean(replayed))},
          {"step_s", mean(step_s)},
          {"pipeline_span_s", mean(span)},
          {"busy_s", busy},
          {"idle_s", idle},
          {"recv_wait_s", wait},
          {"tokens_per_s", tokens / mean(step_s)},
          {"peak_activation_bytes", peak}};
}

}  // namespace

int main(int argc, char** argv) {
  moe4d::MpiRuntime mpi(&argc, &argv);
  const Args args = parse(argc, argv);
  const int p = mpi.world_size(), rank = mpi.world_rank();
  json out;
  const moe4d::test::TempDir dir("moe4d_pipeline_bench");
  try {
    Config base = moe4d::load_config(args.config);
    base.data.train = moe4d::bench::write_zipf_shard(dir.file("train.bin"), base.model.vocab_size, 400000);
    base.data.valid.clear();
    base.checkpoint.dir.clear();
    base.train.eval_interval = 0;
    base.parallel = moe4d::ParallelConfig{};
    base.parallel.pipeline_parallel = p;
    base.parallel.collective_timeout = 600;
    if (args.num_layers > 0) base.model.num_layers = args.num_layers;
    base.parallel.stage_layers = args.stage_layers;
    base.train.steps = args.warmup + args.steps;
    const unsigned cores = std::thread::hardware_concurrency();

    auto world = moe4d::MpiCommunicator::world(moe4d::CommOptions{.timeout_seconds = 600});
    auto pc = moe4d::make_parallel_context(std::move(world), base.parallel, 0);
    out = {{"benchmark", "pipeline_bench"},
           {"config", args.config},
           {"stages", p},
           {"cores", cores},
           {"oversubscribed", unsigned(p) > cores},
           {"micro_batch_size", 1},
           {"seq_length", base.model.seq_length},
           {"num_layers", base.model.num_layers},
           {"stage_layers", args.stage_layers},
           {"measured_steps", args.steps},
           {"warmup_steps", args.warmup}};

    json bubble = json::array(), skipped = json::array();
    for (const std::string& name : args.schedules) {
      const PipelineSchedule schedule = schedule_of(name);
      for (int m : args.micro_batches) {
        Config c = base;
        c.parallel.pipeline_schedule = schedule;
        c.parallel.micro_batch_num = m;
        c.train.global_batch_size = m;
        if (schedule == PipelineSchedule::kInterleaved) c.parallel.virtual_pipeline = 2;
        std::string why;
        if (m < p) why = "micro_batch_num < pipeline_parallel is refused";
        if (schedule == PipelineSchedule::kInterleaved &&
            (p < 2 || m % p != 0 || c.model.num_layers % (2 * p) != 0 || !c.parallel.stage_layers.empty()))
          why = "interleaved needs pipeline_parallel >= 2, micro_batch_num % pipeline_parallel == 0, num_layers "
                "% (2 x pipeline_parallel) == 0 and no stage_layers";
        if (!why.empty()) {
          skipped.push_back({{"schedule", name}, {"micro_batches", m}, {"why", why}});
          continue;
        }
        bubble.push_back(measure(c, *pc, args));
      }
    }
    out["bubble"] = bubble;
    out["skipped"] = skipped;

    if (args.recompute) {
      // The modes take turns for `rounds` rounds and each reports its median, so that a burst of load
      // from other processes does not land on one mode only.
      const RecomputeGranularity modes[] = {RecomputeGranularity::kNone, RecomputeGranularity::kFull,
                                            RecomputeGranularity::kSelective};
      const char* names[] = {"none", "full", "selective"};
      std::vector<std::vector<double>> tps(3), step(3);
      std::vector<json> peak(3);
      Config c = base;
      c.parallel.pipeline_schedule = PipelineSchedule::k1F1B;
      c.parallel.micro_batch_num = std::max(args.recompute_micro_batches, p);
      c.train.global_batch_size = c.parallel.micro_batch_num;
      for (int round = 0; round < args.rounds; ++round)
        for (int i = 0; i < 3; ++i) {
          c.parallel.recompute = modes[i];
          const json r = measure(c, *pc, args);
          tps[i].push_back(r["tokens_per_s"].get<double>());
          step[i].push_back(r["step_s"].get<double>());
          peak[i] = r["peak_activation_bytes"];
        }
      json runs = json::array();
      for (int i = 0; i < 3; ++i)
        runs.push_back({{"recompute", names[i]},
                        {"micro_batches", c.parallel.micro_batch_num},
                        {"tokens_per_s", median(tps[i])},
                        {"tokens_per_s_rounds", tps[i]},
                        {"step_s", median(step[i])},
                        {"throughput_cost_vs_none", 1.0 - median(tps[i]) / median(tps[0])},
                        {"peak_activation_bytes", peak[i]}});
      out["recompute"] = runs;
    }
  } catch (const moe4d::Error& e) {
    std::fprintf(stderr, "pipeline_bench: error (rank %d): %s\n", rank, e.what());
    return 2;
  }
  if (rank == 0) std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
