// bench/moe/replication_bench.cc — the MoE layer's step time on a skewed router with and without
// expert replication (moe.redundant_experts, docs/expert_replication.md). Prints one JSON document.
//
// usage: mpirun -np N replication_bench [--iters=7] [--tokens=2048] [--skew=3] [--shape=tiny|small]
//   Every rank is one EP rank (EP = N). The layer: 8 experts top-2 with the design's tiny (d 256, ffn
//   688) or small (d 512, ffn 1376) shape, normal(0, 0.02) router weights on normal(0, 1) inputs, and
//   the router's selection bias of expert 0 raised (in steps of 0.0025) until expert 0 gets at least
//   `skew` times the mean load over the EP group. Two layers with the same parameters run the same
//   rows: R = 0, and R = N (one replica slot per rank) with the placement planned from that load.
//   Forward + backward are timed alternately (after one warm-up each); step = wall time, max over
//   ranks; median and minimum over `iters`. ratio = step(R = N) / step(R = 0), from this one run.
//   Also reported: the busiest EP rank's routed rows with and without the replicas.
#include <cblas.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../common/bench_args.h"
#include "comm/mpi/mpi_communicator.h"
#include "comm/mpi/mpi_runtime.h"
#include "core/rng.h"
#include "kernels/rope.h"
#include "model/moe_block.h"
#include "model/param_store.h"

namespace {

using namespace moe4d;
using nlohmann::json;

struct Args {
  int iters = 7, tokens = 2048;
  double skew = 3.0;
  std::string shape = "tiny";
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* key) { return moe4d::bench::flag_value(arg, key); };
    if (const char* v = value("--iters=")) a.iters = std::max(1, std::atoi(v));
    else if (const char* v = value("--tokens=")) a.tokens = std::max(16, std::atoi(v));
    else if (const char* v = value("--skew=")) a.skew = std::max(1.0, std::atof(v));
    else if (const char* v = value("--shape=")) a.shape = v;
    else {
      std::fprintf(stderr, "replication_bench: unknown argument '%s' (expected --iters=, --tokens=, --skew=, --shape=)\n",
                   arg.c_str());
      std::exit(2);
    }
  }
  if (a.shape != "tiny" && a.shape != "small") {
    std::fprintf(stderr, "replication_bench: --shape=%s; expected tiny or small\n", a.shape.c_str());
    std::exit(2);
  }
  return a;
}

ModelConfig layer_config(const Args& a, int redundant) {
  ModelConfig m;
  m.hidden_size = a.shape == "tiny" ? 256 : 512;
  m.ffn_hidden_size = a.shape == "tiny" ? 688 : 1376;
  m.vocab_size = 256;
  m.num_layers = 2;
  m.num_heads = 4;
  m.seq_length = a.tokens;  // one sequence: the block only sees rows
  m.moe.num_experts = 8;
  m.moe.top_k = 2;
  m.moe.redundant_experts = redundant;
  m.moe.rebalance_interval = redundant > 0 ? 1 : 0;
  return m;
}

struct Layer {
  Layer(ParallelContext& pc, const ModelConfig& config)
      : model(config), block(1, model, pc, params), rope(model.seq_length, model.head_dim()) {
    params.finalize();
    params.init_values(3);
    stats.push_back({.layer = 1, .tokens_per_expert = std::vector<double>(model.moe.num_experts, 0.0)});
  }
  ModelConfig model;
  ParamStore params;
  MoeBlock block;
  RopeTable rope;
  std::vector<MoeLayerStats> stats;
  std::vector<double> steps;
};

double run(Layer& layer, ParallelContext& pc, const std::vector<float>& x, bool record) {
  Arena saved, scratch;
  std::vector<float> out(x.size()), dx(x.size());
  layer.stats[0] = {.layer = 1, .tokens_per_expert = std::vector<double>(layer.model.moe.num_experts, 0.0)};
  BlockContext ctx{pc, layer.params, layer.model, layer.rope, saved, scratch, 1, layer.model.seq_length, 1.0f,
                   RecomputeGranularity::kNone, record ? &layer.stats : nullptr};
  // One timed forward + backward is one step of one micro-batch: the replica weights are fetched
  // again (inside the forward, as under ZeRO-3), as after an optimizer step.
  if (ExpertReplicas* replicas = layer.block.replicas()) replicas->invalidate();
  MPI_Barrier(dynamic_cast<MpiCommunicator&>(*pc.ep).handle());
  const double t0 = MPI_Wtime();
  void* s = layer.block.forward(x.data(), out.data(), ctx);
  scratch.reset();
  layer.block.backward(dx.data(), x.data(), s, ctx);
  double t = MPI_Wtime() - t0;
  pc.ep->all_reduce(&t, 1, DType::kF64, ReduceOp::kMax);
  return t;
}

std::vector<int64_t> global_load(Layer& layer, ParallelContext& pc, const std::vector<float>& x) {
  run(layer, pc, x, true);
  std::vector<double> load = layer.stats[0].tokens_per_expert;
  pc.ep->all_reduce(load.data(), load.size(), DType::kF64, ReduceOp::kSum);
  std::vector<int64_t> out;
  for (double l : load) out.push_back(std::llround(l));
  return out;
}

double imbalance(const std::vector<int64_t>& load) {
  double sum = 0, mx = 0;
  for (int64_t l : load) sum += double(l), mx = std::max(mx, double(l));
  return mx / (sum / double(load.size()));
}

json stat(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {{"median", v[v.size() / 2]}, {"min", v.front()}};
}

}  // namespace

int main(int argc, char** argv) {
  MpiRuntime runtime(&argc, &argv);
  const Args args = parse(argc, argv);
  openblas_set_num_threads(1);
  auto world = MpiCommunicator::world();
  ParallelConfig par;
  par.expert_parallel = world->size();
  auto pc = make_parallel_context(std::move(world), par, 0);
  const int ep = pc->ep_size();
  if (ep < 2 || 8 % ep != 0) {
    if (pc->rank == 0) std::fprintf(stderr, "replication_bench: needs 2, 4 or 8 ranks (EP over 8 experts), got %d\n", ep);
    return 2;
  }
  Layer plain(*pc, layer_config(args, 0)), replicated(*pc, layer_config(args, ep));
  std::vector<float> x(size_t(args.tokens) * plain.model.hidden_size);
  for (size_t i = 0; i < x.size(); ++i) x[i] = normal_at(hash_combine(77, uint64_t(pc->rank)), i);

  float bias = 0;
  std::vector<int64_t> load;
  for (int i = 1; i <= 400; ++i) {
    bias = 0.0025f * i;
    plain.block.router_bias()[0] = bias;
    load = global_load(plain, *pc, x);
    if (imbalance(load) >= args.skew) break;
  }
  replicated.block.router_bias()[0] = bias;
  replicated.block.set_placement(expert_placement_plan(load, 8, ep, ep));

  run(replicated, *pc, x, true);  // warm-up, and the rows per EP rank with / without replicas
  const std::vector<double> with = replicated.stats[0].rank_rows, without = replicated.stats[0].rank_rows_without;
  for (int it = 0; it < args.iters; ++it) {
    plain.steps.push_back(run(plain, *pc, x, false));
    replicated.steps.push_back(run(replicated, *pc, x, false));
  }
  const json a = stat(plain.steps), b = stat(replicated.steps);
  if (pc->rank == 0) {
    const json result = {
        {"benchmark", "replication_bench"},
        {"ep", ep},
        {"shape", args.shape},
        {"hidden", plain.model.hidden_size},
        {"ffn", plain.model.ffn_hidden_size},
        {"experts", 8},
        {"top_k", 2},
        {"tokens_per_rank", args.tokens},
        {"iters", args.iters},
        {"expert0_load_over_mean", imbalance(load)},
        {"router_bias", bias},
        {"placement", replicated.block.placement()->describe()},
        {"busiest_rank_rows", {{"without", *std::max_element(without.begin(), without.end())},
                               {"with", *std::max_element(with.begin(), with.end())}}},
        {"step_s", {{"redundant_0", a}, {"redundant_" + std::to_string(ep), b}}},
        {"ratio_median", b["median"].get<double>() / a["median"].get<double>()},
        {"ratio_min", b["min"].get<double>() / a["min"].get<double>()}};
    std::printf("%s\n", result.dump(2).c_str());
  }
  return 0;
}
