// bench/trace/trace_bench.cc — the cost of tracing (train.trace_steps), DP2 x TP2 on 4 ranks.
//
// Two runs of the same small MoE config in one process: a baseline without tracing, then a run
// that traces every other step (even steps), so traced and untraced steps interleave and share the
// machine's noise. Reported (rank 0's step times from metrics.jsonl, medians after 2 warm-up steps):
//   traced_overhead      traced / untraced step time - 1   (the entry-time exchange, layer stamps)
//   untraced_vs_baseline untraced steps of the traced run / baseline - 1 (should be ~0: noise)
//   end_step_fraction    median time of gathering + writing a traced step's events, outside the
//                        step, / untraced step time
// and, because step times on a shared machine are noisy, the cost per operation measured directly:
// a 64-float all_reduce on the world, in alternating blocks traced / untraced (median of the block
// means), with the traced step's operation count the estimated overhead per step.
// Usage: mpirun -np 4 trace_bench [steps=16]
#include <mpi.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../../tests/common/temp_dir.h"
#include "../common/bench_configs.h"
#include "comm/comm_trace.h"
#include "comm/mpi/mpi_communicator.h"
#include "comm/mpi/mpi_runtime.h"
#include "parallel/parallel_context.h"
#include "train/trainer.h"

namespace moe4d {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

Config bench_run_config(const std::string& shard, int steps) {
  Config c = bench::bench_config("tiny", shard);
  c.model.hidden_size = 128;
  c.model.ffn_hidden_size = 344;
  c.model.num_heads = 4;
  c.model.seq_length = 128;
  c.model.moe.num_experts = 4;
  c.train.steps = steps;
  c.train.warmup_steps = 0;
  c.parallel.data_parallel = 2;
  c.parallel.tensor_parallel = 2;
  c.parallel.micro_batch_num = 2;
  return c;
}

// Rank 0's step times by step number.
std::vector<double> step_times(const std::string& metrics) {
  std::vector<double> out;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line)["time"]["step_s"].get<double>());
  return out;
}

nlohmann::json read_other_data(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) return {};
  std::string text;
  char buffer[1 << 16];
  for (int n; (n = gzread(f, buffer, sizeof(buffer))) > 0;) text.append(buffer, size_t(n));
  gzclose(f);
  return nlohmann::json::parse(text)["otherData"];
}

// Seconds per all_reduce of 64 floats, traced and untraced, in alternating blocks.
std::pair<double, double> per_call_seconds(Communicator& world, int rank) {
  constexpr int kBlocks = 40, kCalls = 50;
  std::vector<float> data(64, 1.0f);
  std::vector<double> traced, untraced;
  for (int b = 0; b < 2 * kBlocks; ++b) {
    const bool trace = b % 2 == 1;
    CommTrace recorder(rank, 0);
    if (trace) world.set_trace(&recorder);
    world.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kCalls; ++i) world.all_reduce(data.data(), data.size(), ReduceOp::kMax);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / kCalls;
    world.set_trace(nullptr);
    (trace ? traced : untraced).push_back(s);
  }
  return {median(traced), median(untraced)};
}

// Operations a traced step recorded on this rank (the slices with cat "comm").
int64_t comm_ops_per_traced_step(const std::string& trace_path, int steps_traced) {
  gzFile f = gzopen(trace_path.c_str(), "rb");
  if (!f) return 0;
  std::string text;
  char buffer[1 << 16];
  for (int n; (n = gzread(f, buffer, sizeof(buffer))) > 0;) text.append(buffer, size_t(n));
  gzclose(f);
  int64_t ops = 0;
  const nlohmann::json trace = nlohmann::json::parse(text);  // named: a range-for over a temporary's member dangles
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X" && e["pid"] == 0 && e.value("cat", std::string()) == "comm") ++ops;
  return steps_traced > 0 ? ops / steps_traced : 0;
}

}  // namespace
}  // namespace moe4d

int main(int argc, char** argv) {
  using namespace moe4d;
  MpiRuntime mpi(&argc, &argv);
  const int steps = argc > 1 ? std::max(6, std::atoi(argv[1])) : 16;
  test::TempDir dir("moe4d-trace-bench");
  const std::string shard = bench::write_bench_shard(dir.file("train.bin"));
  std::vector<double> baseline, traced, untraced;
  nlohmann::json other;
  double per_call_traced = 0, per_call_untraced = 0;
  {
    auto world = MpiCommunicator::world(CommOptions{.timeout_seconds = 600});
    std::tie(per_call_traced, per_call_untraced) = per_call_seconds(*world, world->rank());
  }
  for (bool trace : {false, true}) {
    Config c = bench_run_config(shard, steps);
    if (trace)
      for (int s = 2; s <= steps; s += 2) c.train.trace_steps.push_back(s);
    const std::string metrics = dir.file(trace ? "traced/metrics.jsonl" : "baseline/metrics.jsonl");
    auto pc = make_parallel_context(MpiCommunicator::world(CommOptions{.timeout_seconds = 600}), c.parallel, 0);
    {
      Trainer trainer(c, *pc, {.quiet = true, .metrics_path = metrics});
      trainer.run();
    }
    pc->world->barrier();
    if (pc->rank != 0) continue;
    const std::vector<double> t = step_times(metrics);
    for (int s = 3; s <= int(t.size()); ++s) {  // after 2 warm-up steps
      if (!trace)
        baseline.push_back(t[s - 1]);
      else
        (s % 2 == 0 ? traced : untraced).push_back(t[s - 1]);
    }
    if (trace) other = read_other_data(dir.file("traced/trace.json.gz"));
  }
  if (mpi.world_rank() == 0) {
    const double b = median(baseline), tr = median(traced), un = median(untraced);
    const int64_t ops = comm_ops_per_traced_step(dir.file("traced/trace.json.gz"), int(traced.size()) + 1);
    const double extra = per_call_traced - per_call_untraced;
    std::vector<double> writes;
    for (const auto& v : other["end_step_seconds"]) writes.push_back(v.get<double>());
    const nlohmann::json doc = {{"layout", "dp2 x tp2 (4 ranks)"},
                                {"model", "d=128, 4 layers, 4 experts top-2, seq 128, batch 8"},
                                {"steps", steps},
                                {"baseline_median_step_s", b},
                                {"untraced_median_step_s", un},
                                {"traced_median_step_s", tr},
                                {"traced_overhead", tr / un - 1},
                                {"untraced_vs_baseline", un / b - 1},
                                {"end_step_median_s", median(writes)},
                                {"end_step_fraction", median(writes) / un},
                                {"all_reduce_64_untraced_s", per_call_untraced},
                                {"all_reduce_64_traced_s", per_call_traced},
                                {"comm_ops_per_traced_step_rank0", ops},
                                {"estimated_traced_overhead", double(ops) * extra / un},
                                {"baseline_step_s", baseline},
                                {"traced_step_s", traced},
                                {"untraced_step_s", untraced}};
    std::printf("%s\n", doc.dump(2).c_str());
  }
  return 0;
}
