// bench/moe/moe_bench.cc — what expert parallelism costs per MoE layer, and how much of it the
// sliced all-to-all (moe.a2a_chunks) hides. Prints one JSON document (rank 0).
//
// usage: mpirun -np N moe_bench [--shapes=tiny,small] [--chunks=1,2,4] [--iters=5] [--tokens=2048]
//                               [--routing=balanced|random]
//   Every rank is one EP rank (EP = N, TP = DP = 1) holding E / N experts of an MoE layer with the
//   design's shapes: tiny d 256 / ffn 688, small d 512 / ffn 1376; 8 experts top-2; `tokens` tokens per
//   rank (default 8 sequences x 256). The real router picks the experts:
//     balanced — router weights W_r[i, e] = [i == e] and token t's input peaks at dimensions t mod E
//                and t + 1 mod E (plus noise), so every expert gets exactly T * k / E rows from every
//                rank and all EP ranks compute the same amount: the exposed time measures
//                communication, not load imbalance between ranks (which no slicing can hide);
//     random   — normal(0, 0.02) router weights on normal(0, 1) inputs (a few % imbalance).
//   exchange: one dispatch + combine through ExpertExchange (1 slice) vs raw blocking MPI_Alltoallv
//             of the same byte counts in both directions, on the same routing; ratio = exchange /
//             raw. The plan (its count all_gather) is timed separately.
//   layer:    MoeBlock forward + backward for each a2a_chunks. step = wall time (max over ranks);
//             exposed = time blocked waiting for the EP group's all-to-alls (mean over ranks), i.e.
//             communication not hidden behind expert GEMMs; comm_share = exposed / step;
//             plan_exposed = time blocked in the plan's count all_gather (where ranks that arrive
//             at the layer at different times meet). exposed_vs_first: exposed time of each chunk
//             count / that of the first one listed.
//   Each figure is the median over `iters` repetitions (after one warm-up), with the minimum too.
//   OpenBLAS runs one thread per rank (ranks are the parallelism).
#include <cblas.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/mpi/mpi_communicator.h"
#include "comm/mpi/mpi_runtime.h"
#include "config/config.h"
#include "core/rng.h"
#include "kernels/gemm.h"
#include "kernels/moe_dispatch.h"
#include "kernels/rope.h"
#include "kernels/router.h"
#include "model/moe_block.h"
#include "model/param_store.h"

namespace {

using namespace moe4d;
using nlohmann::json;

struct Args {
  std::vector<std::string> shapes = {"tiny", "small"};
  std::vector<int> chunks = {1, 2, 4};
  int iters = 5;
  int tokens = 8 * 256;
  bool balanced = true;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const std::string& key) -> const char* {
      return arg.compare(0, key.size(), key) == 0 ? arg.c_str() + key.size() : nullptr;
    };
    if (const char* v = value("--shapes=")) {
      a.shapes = split(v);
    } else if (const char* v = value("--chunks=")) {
      a.chunks.clear();
      for (const std::string& c : split(v)) a.chunks.push_back(std::max(1, std::stoi(c)));
    } else if (const char* v = value("--iters=")) {
      a.iters = std::max(1, std::atoi(v));
    } else if (const char* v = value("--tokens=")) {
      a.tokens = std::max(1, std::atoi(v));
    } else if (const char* v = value("--routing=")) {
      if (std::string(v) != "balanced" && std::string(v) != "random") {
        std::fprintf(stderr, "moe_bench: --routing=%s; expected balanced or random\n", v);
        std::exit(2);
      }
      a.balanced = std::string(v) == "balanced";
    } else {
      std::fprintf(stderr, "moe_bench: unknown argument '%s' (expected --shapes=, --chunks=, --iters=, --tokens=, --routing=)\n",
                   arg.c_str());
      std::exit(2);
    }
  }
  return a;
}

ModelConfig shape_config(const std::string& name, int tokens) {
  ModelConfig m;
  if (name == "tiny") {
    m.hidden_size = 256;
    m.ffn_hidden_size = 688;
  } else if (name == "small") {
    m.hidden_size = 512;
    m.ffn_hidden_size = 1376;
  } else {
    std::fprintf(stderr, "moe_bench: unknown shape '%s' (expected tiny or small)\n", name.c_str());
    std::exit(2);
  }
  m.vocab_size = 256;
  m.num_layers = 2;
  m.num_heads = 4;
  m.seq_length = tokens;  // one sequence of `tokens` tokens: the block only sees rows
  m.moe.num_experts = 8;
  m.moe.top_k = 2;
  m.moe.aux_loss_coeff = 0.01;
  return m;
}

struct Stat {
  double median = 0, min = 0;
};
Stat summarise(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front()};
}
json to_json(const Stat& s) { return {{"median", s.median}, {"min", s.min}}; }

double max_over(Communicator& c, double v) {
  c.all_reduce(&v, 1, DType::kF64, ReduceOp::kMax);
  return v;
}
double mean_over(Communicator& c, double v) {
  c.all_reduce(&v, 1, DType::kF64, ReduceOp::kSum);
  return v / c.size();
}

// Router weights [d, E] for the routing mode (see the file comment).
std::vector<float> router_weights(const ModelConfig& m, bool balanced) {
  const int d = m.hidden_size, E = m.moe.num_experts;
  std::vector<float> w(size_t(d) * E);
  for (int i = 0; i < d; ++i)
    for (int e = 0; e < E; ++e) w[size_t(i) * E + e] = balanced ? (i == e ? 1.0f : 0.0f) : 0.02f * normal_at(5, i * E + e);
  return w;
}

// This rank's input [T, d] for the routing mode.
std::vector<float> layer_input(const ModelConfig& m, int tokens, int rank, bool balanced) {
  const int d = m.hidden_size, E = m.moe.num_experts;
  std::vector<float> x(size_t(tokens) * d);
  const uint64_t key = hash_combine(77, uint64_t(rank));
  for (size_t i = 0; i < x.size(); ++i) x[i] = (balanced ? 0.1f : 1.0f) * normal_at(key, i);
  if (balanced) {
    for (int t = 0; t < tokens; ++t) {
      x[size_t(t) * d + t % E] += 3.0f;
      x[size_t(t) * d + (t + 1) % E] += 3.0f;
    }
  }
  return x;
}

// Routing of `x` [T, d] (normalised like the block does, norm weight 1): token layout offsets.
std::vector<int> route(const ModelConfig& m, const std::vector<float>& x, int tokens, bool balanced) {
  const int d = m.hidden_size, E = m.moe.num_experts, k = m.moe.top_k;
  const std::vector<float> w = router_weights(m, balanced);
  std::vector<float> xn(x.size()), logits(size_t(tokens) * E), probs(logits.size()), lse(tokens), topk_w(tokens * k);
  for (int t = 0; t < tokens; ++t) {
    double ms = 0;
    for (int i = 0; i < d; ++i) ms += double(x[size_t(t) * d + i]) * x[size_t(t) * d + i];
    const float r = float(1.0 / std::sqrt(ms / d + 1e-5));
    for (int i = 0; i < d; ++i) xn[size_t(t) * d + i] = x[size_t(t) * d + i] * r;
  }
  matmul_forward(logits.data(), xn.data(), w.data(), tokens, d, E);
  std::vector<int> topk(tokens * k), offsets(E + 1), row_slot(tokens * k), slot_row(tokens * k), scratch(tokens * k);
  router_forward(probs.data(), lse.data(), topk.data(), topk_w.data(), logits.data(), nullptr, tokens, E, k);
  moe_route_plan(offsets.data(), row_slot.data(), slot_row.data(), scratch.data(), topk.data(), topk_w.data(), tokens,
                 E, k, -1);
  return offsets;
}

json bench_exchange(ParallelContext& pc, const ModelConfig& m, const std::vector<float>& x, const Args& args) {
  const int d = m.hidden_size, tokens = args.tokens;
  Communicator& ep = *pc.ep;
  const std::vector<int> offsets = route(m, x, tokens, args.balanced);
  ExpertExchange exchange(ep, m.moe.num_experts, 1);
  Arena memory, scratch;
  ExpertExchangePlan plan = exchange.plan(offsets.data(), memory);
  std::vector<float> rows(size_t(plan.send_rows) * d, 1.0f), at_experts(size_t(plan.recv_rows) * d),
      back(rows.size());

  // Raw MPI: the same per-peer element counts, contiguous buffers, both directions.
  const int n = ep.size();
  std::vector<int> sc(n), sd(n), rc(n), rd(n);
  int s_at = 0, r_at = 0;
  for (int p = 0; p < n; ++p) {
    sc[p] = int(plan.slices[0].token.peer_rows[p]) * d;
    rc[p] = int(plan.slices[0].expert.peer_rows[p]) * d;
    sd[p] = s_at;
    rd[p] = r_at;
    s_at += sc[p];
    r_at += rc[p];
  }
  MPI_Comm raw = dynamic_cast<MpiCommunicator&>(ep).handle();

  std::vector<double> t_plan, t_moe, t_raw;
  for (int it = 0; it <= args.iters; ++it) {
    MPI_Barrier(raw);
    double t0 = MPI_Wtime();
    memory.reset();
    plan = exchange.plan(offsets.data(), memory);
    const double plan_s = MPI_Wtime() - t0;

    MPI_Barrier(raw);
    t0 = MPI_Wtime();
    exchange.dispatch(rows.data(), at_experts.data(), d, plan, scratch);
    exchange.combine(at_experts.data(), back.data(), d, plan, scratch);
    const double moe_s = MPI_Wtime() - t0;
    scratch.reset();

    MPI_Barrier(raw);
    t0 = MPI_Wtime();
    MPI_Alltoallv(rows.data(), sc.data(), sd.data(), MPI_FLOAT, at_experts.data(), rc.data(), rd.data(), MPI_FLOAT, raw);
    MPI_Alltoallv(at_experts.data(), rc.data(), rd.data(), MPI_FLOAT, back.data(), sc.data(), sd.data(), MPI_FLOAT, raw);
    const double raw_s = MPI_Wtime() - t0;
    if (it == 0) continue;  // warm-up
    t_plan.push_back(max_over(ep, plan_s));
    t_moe.push_back(max_over(ep, moe_s));
    t_raw.push_back(max_over(ep, raw_s));
  }
  const Stat moe = summarise(t_moe), rawt = summarise(t_raw);
  size_t sent_rows = 0;
  for (int p = 0; p < n; ++p)
    if (p != ep.rank()) sent_rows += plan.slices[0].token.peer_rows[p];
  double fewest = plan.recv_rows, most = plan.recv_rows;
  ep.all_reduce(&fewest, 1, DType::kF64, ReduceOp::kMin);
  ep.all_reduce(&most, 1, DType::kF64, ReduceOp::kMax);
  return {{"rows_per_rank", plan.send_rows},
          {"expert_rows_per_rank", {{"min", fewest}, {"max", most}}},
          {"bytes_to_other_ranks", mean_over(ep, double(sent_rows) * d * sizeof(float))},
          {"plan_s", to_json(summarise(t_plan))},
          {"dispatch_combine_s", to_json(moe)},
          {"raw_alltoallv_s", to_json(rawt)},
          {"ratio_median", moe.median / rawt.median},
          {"ratio_min", moe.min / rawt.min}};
}

// One MoE layer per chunk count, run round-robin (iteration i runs every chunk count once) so that
// load from other processes on a shared machine falls on all of them alike.
ModelConfig with_chunks(ModelConfig m, int chunks) {
  m.moe.a2a_chunks = chunks;
  return m;
}

struct LayerUnderTest {
  LayerUnderTest(ParallelContext& pc, const ModelConfig& shape, int chunks, bool balanced)
      : model(with_chunks(shape, chunks)), block(1, model, pc, params), rope(model.seq_length, model.head_dim()) {
    params.finalize();
    params.init_values(3);
    const std::vector<float> w = router_weights(model, balanced);
    std::copy(w.begin(), w.end(), params.value(params.find("layers.1.moe.router.weight")));
  }
  ModelConfig model;
  ParamStore params;
  MoeBlock block;
  RopeTable rope;
  std::vector<double> step, fwd, bwd, exposed, busy, plan_exposed;
};

json bench_layers(ParallelContext& pc, const ModelConfig& shape, const std::vector<float>& x, const Args& args) {
  std::vector<std::unique_ptr<LayerUnderTest>> layers;
  for (int c : args.chunks) layers.push_back(std::make_unique<LayerUnderTest>(pc, shape, c, args.balanced));
  Arena saved, scratch;
  const size_t n = x.size();
  std::vector<float> out(n), dx(n);
  Communicator& ep = *pc.ep;
  MPI_Comm raw = dynamic_cast<MpiCommunicator&>(ep).handle();

  for (int it = 0; it <= args.iters; ++it) {
    for (auto& layer : layers) {
      BlockContext ctx{pc, layer->params, layer->model, layer->rope, saved, scratch, 1, args.tokens, 1.0f,
                       RecomputeGranularity::kNone, nullptr};
      const CommStats before = ep.stats();
      MPI_Barrier(raw);
      const double t0 = MPI_Wtime();
      void* s = layer->block.forward(x.data(), out.data(), ctx);
      scratch.reset();
      const double t1 = MPI_Wtime();
      layer->block.backward(dx.data(), x.data(), s, ctx);
      scratch.reset();
      saved.reset();
      const double t2 = MPI_Wtime();
      const CommStats after = ep.stats();
      if (it == 0) continue;  // warm-up
      const auto& a2a_before = before[CommOp::kAllToAllV];
      const auto& a2a_after = after[CommOp::kAllToAllV];
      layer->fwd.push_back(max_over(ep, t1 - t0));
      layer->bwd.push_back(max_over(ep, t2 - t1));
      layer->step.push_back(max_over(ep, t2 - t0));
      layer->exposed.push_back(mean_over(ep, a2a_after.exposed_seconds - a2a_before.exposed_seconds));
      layer->busy.push_back(mean_over(ep, a2a_after.busy_seconds - a2a_before.busy_seconds));
      layer->plan_exposed.push_back(mean_over(
          ep, after[CommOp::kAllGather].exposed_seconds - before[CommOp::kAllGather].exposed_seconds));
    }
  }
  json result = json::array();
  for (auto& layer : layers) {
    const Stat step = summarise(layer->step), exposed = summarise(layer->exposed);
    result.push_back({{"a2a_chunks", layer->model.moe.a2a_chunks},
                      {"step_s", to_json(step)},
                      {"forward_s", to_json(summarise(layer->fwd))},
                      {"backward_s", to_json(summarise(layer->bwd))},
                      {"a2a_exposed_s", to_json(exposed)},
                      {"a2a_busy_s", to_json(summarise(layer->busy))},
                      {"plan_exposed_s", to_json(summarise(layer->plan_exposed))},
                      {"comm_share", exposed.median / step.median}});
  }
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  MpiRuntime runtime(&argc, &argv);
  const Args args = parse(argc, argv);
  openblas_set_num_threads(1);
  json result;
  {
    auto world = MpiCommunicator::world();
    ParallelConfig par;
    par.expert_parallel = world->size();
    auto pc = make_parallel_context(std::move(world), par, 0);
    result = {{"benchmark", "moe_bench"}, {"ranks", pc->ep_size()}, {"ep", pc->ep_size()},
              {"tokens_per_rank", args.tokens}, {"iters", args.iters}, {"openblas_threads", 1},
              {"routing", args.balanced ? "balanced" : "random"}};
    json shapes = json::array();
    for (const std::string& name : args.shapes) {
      const ModelConfig m = shape_config(name, args.tokens);
      if (m.moe.num_experts % pc->ep_size() != 0) {
        std::fprintf(stderr, "moe_bench: %d experts do not divide over %d ranks\n", m.moe.num_experts, pc->ep_size());
        return 2;
      }
      const std::vector<float> x = layer_input(m, args.tokens, pc->rank, args.balanced);
      json entry = {{"name", name},
                    {"hidden", m.hidden_size},
                    {"ffn", m.ffn_hidden_size},
                    {"experts", m.moe.num_experts},
                    {"top_k", m.moe.top_k}};
      entry["exchange"] = bench_exchange(*pc, m, x, args);
      const json layers = bench_layers(*pc, m, x, args);
      entry["layer"] = layers;
      // Exposed all-to-all time of each chunk count relative to the first one listed (normally 1).
      json relative = json::object();
      const double base = layers[0]["a2a_exposed_s"]["median"].get<double>();
      for (const json& l : layers)
        relative[std::to_string(l["a2a_chunks"].get<int>())] = base > 0 ? l["a2a_exposed_s"]["median"].get<double>() / base : 0.0;
      entry["exposed_vs_first"] = relative;
      shapes.push_back(entry);
    }
    result["shapes"] = shapes;
    if (pc->rank == 0) std::printf("%s\n", result.dump(2).c_str());
  }
  return 0;
}
