// bench/checkpoint/checkpoint_bench.cc — checkpoint.format full vs sharded vs sharded + async:
// how long a save takes, how long it blocks the step loop, and how much extra memory each rank
// needs for it (docs/checkpoints.md, docs/benchmarks.md). Prints one JSON document (rank 0).
//
// usage: mpirun -np N checkpoint_bench [--config=tiny|small] [--seq=64] [--steps=6] [--zero=1]
//   The bench config (bench/common/bench_configs.h) trains data-parallel over the N ranks
//   (zero_stage --zero, one micro-batch per step) on a synthetic shard, once per mode: `none` (no
//   checkpoints: the memory and step-time baseline), `full`, `sharded`, `async` (sharded with
//   checkpoint.async). Each mode is a fresh Trainer: one warm-up step, then the resident set's
//   high-water mark is reset (/proc/self/clear_refs; large allocations are mmap'ed, mallopt, so
//   freed buffers leave the resident set) and Trainer::run trains --steps more steps with a save
//   every 2nd step and at the end. From the metrics records: every save's `blocked_s` (the step
//   loop's time on it) and `total_s` (start to commit) — all saves but the last, which the end of
//   the run commits — and the steps' times; from /proc: each rank's peak minus its resident set at
//   the reset, and that minus the same figure of mode `none` (the save's own extra memory).
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
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
#include "core/error.h"
#include "train/checkpoint_shards.h"
#include "train/trainer.h"

namespace {

using moe4d::Config;
using nlohmann::json;

struct Args {
  std::string config = "tiny";
  int seq = 64;
  int steps = 6;
  int zero = 1;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* key) { return moe4d::bench::flag_value(arg, key); };
    if (const char* v = value("--config=")) a.config = v;
    else if (const char* v = value("--seq=")) a.seq = std::max(8, std::atoi(v));
    else if (const char* v = value("--steps=")) a.steps = std::max(2, std::atoi(v));
    else if (const char* v = value("--zero=")) a.zero = std::clamp(std::atoi(v), 0, 3);
    else throw moe4d::Error("checkpoint_bench: unknown argument " + arg);
  }
  return a;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

uint64_t directory_bytes(const std::string& dir) {
  uint64_t bytes = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.is_regular_file()) bytes += e.file_size();
  return bytes;
}

// One mode: a fresh Trainer, a warm-up step, then `steps` steps with saves (rank 0 gets the figures).
json measure(const std::string& mode, Config c, moe4d::ParallelContext& pc, const std::string& root, int steps) {
  const std::string metrics = root + "/" + mode + ".jsonl";
  if (mode != "none") c.checkpoint.dir = root + "/" + mode;
  c.checkpoint.format = mode == "full" ? moe4d::CheckpointFormat::kFull : moe4d::CheckpointFormat::kSharded;
  c.checkpoint.async = mode == "async";
  c.checkpoint.interval = 2;
  c.train.steps = 1 + steps;
  std::string last;
  double baseline = 0, peak = 0;
  bool reset = false;
  {
    moe4d::Trainer trainer(c, pc, {.quiet = true, .metrics_path = metrics});
    trainer.train_step();
    reset = moe4d::bench::reset_peak_rss();
    baseline = moe4d::bench::status_bytes("VmRSS:");
    trainer.run();
    peak = moe4d::bench::status_bytes("VmHWM:");
    last = trainer.last_checkpoint();
  }
  const double mine[3] = {baseline, peak, reset ? 1.0 : 0.0};
  std::vector<double> all(3 * size_t(pc.world->size()));
  pc.world->all_gather(mine, all.data(), 3, moe4d::DType::kF64);
  json out = {{"mode", mode}};
  if (pc.rank != 0) return out;
  std::vector<double> blocked, total, step_s;
  json saves = json::array();
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    const json record = json::parse(line);
    if (record["step"].get<int>() > 1) step_s.push_back(record["time"]["step_s"].get<double>());
    for (const json& save : record.value("checkpoints", json::array())) {
      blocked.push_back(save["blocked_s"]);
      total.push_back(save["total_s"]);
      saves.push_back(save);
    }
  }
  json ranks = json::array();
  for (int r = 0; r < pc.world->size(); ++r) {
    const double* m = all.data() + 3 * size_t(r);
    ranks.push_back({{"rank", r}, {"reset_worked", m[2] != 0}, {"baseline_bytes", m[0]}, {"peak_extra_bytes", m[1] - m[0]}});
  }
  out["saves"] = saves;
  out["median_blocked_s"] = median(blocked);
  out["median_total_s"] = median(total);
  out["median_step_s"] = median(step_s);
  out["checkpoint_bytes"] = last.empty() ? 0 : directory_bytes(last);
  out["per_rank"] = ranks;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  moe4d::MpiRuntime mpi(&argc, &argv);
  const int ranks = mpi.world_size(), rank = mpi.world_rank();
  // Large buffers straight from mmap, returned on free: each mode's resident set starts clean.
  mallopt(M_MMAP_THRESHOLD, 64 * 1024);
  json out;
  const moe4d::test::TempDir dir("moe4d_checkpoint_bench");
  try {
    const Args args = parse(argc, argv);
    Config base = moe4d::bench::bench_config(args.config, dir.file("train.bin"));
    base.model.seq_length = args.seq;
    moe4d::bench::write_zipf_shard(base.data.train, base.model.vocab_size, 200000);
    base.parallel.data_parallel = ranks;
    base.parallel.micro_batch_num = 1;
    base.parallel.zero_stage = args.zero;
    base.parallel.collective_timeout = 600;
    base.train.global_batch_size = 2 * int64_t(ranks);
    base.checkpoint.keep = 2;

    auto world = moe4d::MpiCommunicator::world(moe4d::CommOptions{.timeout_seconds = 600});
    auto pc = moe4d::make_parallel_context(std::move(world), base.parallel, 0);
    // The checkpoints go to one directory every rank sees: rank 0's.
    const std::string root = moe4d::broadcast_text(*pc->world, dir.path(), 0);
    out = {{"benchmark", "checkpoint_bench"},
           {"config", args.config},
           {"ranks", ranks},
           {"cores", sysconf(_SC_NPROCESSORS_ONLN)},
           {"seq_length", args.seq},
           {"zero_stage", args.zero},
           {"data_parallel", ranks},
           {"steps", args.steps},
           {"save_interval", 2}};
    json modes = json::array();
    double none_extra[64] = {};
    for (const char* mode : {"none", "full", "sharded", "async"}) {
      json m = measure(mode, base, *pc, root, args.steps);
      if (rank == 0) {
        for (json& r : m["per_rank"]) {
          const int i = r["rank"];
          if (std::string(mode) == "none" && i < 64) none_extra[i] = r["peak_extra_bytes"];
          r["checkpoint_extra_bytes"] = r["peak_extra_bytes"].get<double>() - (i < 64 ? none_extra[i] : 0.0);
        }
        double others = 0;
        for (const json& r : m["per_rank"])
          if (r["rank"] != 0) others = std::max(others, r["checkpoint_extra_bytes"].get<double>());
        m["rank0_checkpoint_extra_bytes"] = m["per_rank"][0]["checkpoint_extra_bytes"];
        m["others_max_checkpoint_extra_bytes"] = others;
      }
      modes.push_back(m);
    }
    out["modes"] = modes;
  } catch (const moe4d::Error& e) {
    std::fprintf(stderr, "checkpoint_bench: error (rank %d): %s\n", rank, e.what());
    return 2;
  }
  if (rank == 0) std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
