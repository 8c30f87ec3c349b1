// plan/layout_evaluator.cc — memory and step time of one layout (model in plan/layout_evaluator.h).
#include "plan/layout_evaluator.h"

#include <algorithm>

#include <fmt/format.h>

#include "config/layout_rules.h"
#include "plan/compute_model.h"
#include "plan/replication_model.h"
#include "plan/schedule_model.h"

namespace moe4d {
namespace {

// Communication of `comm` seconds running beside `work` seconds of compute, in `chunks` slices:
// the part that does not hide.
double exposed_behind(double comm, double work, int chunks) {
  if (comm <= 0) return 0;
  if (chunks <= 1) return comm;
  return std::max(comm, work) + std::min(comm, work) / chunks - work;
}

// Bucketed reduction of `comm` seconds behind `work` seconds of backward: the last bucket always waits.
double exposed_buckets(double comm, double work, int buckets, bool overlap) {
  if (comm <= 0) return 0;
  if (!overlap) return comm;
  const int nb = std::max(1, buckets);
  return comm / nb + std::max(0.0, comm * (nb - 1) / nb - work);
}

}  // namespace

std::string split_problem(const PlanContext& ctx, const Layout& l) {
  const ModelConfig& m = ctx.model;
  const int devices = ctx.cluster.device_count();
  if (l.dp < 1 || l.ep < 1 || l.tp < 1 || l.pp < 1) return "every parallel size must be >= 1";
  if (l.world() != devices)
    return fmt::format("parallel size mismatch: dp {} x ep {} x tp {} x pp {} = {}, but {} devices are available", l.dp,
                       l.ep, l.tp, l.pp, l.world(), devices);
  // What each size must divide: config/layout_rules.h, the rules `moe4d train` checks too.
  const std::vector<SplitRule> rules = split_rules(m);
  for (const SplitRule& rule : rules)
    if (rule.by == SplitRule::kTensor && rule.value % l.tp != 0)
      return fmt::format("tp {} does not divide {} {}", l.tp, rule.quantity, rule.value);
  if (!m.is_moe() && l.ep > 1) return fmt::format("ep {} needs an MoE model (num_experts is 0)", l.ep);
  for (const SplitRule& rule : rules)
    if (rule.by == SplitRule::kExpert && rule.value % l.ep != 0)
      return fmt::format("ep {} does not divide {} {}", l.ep, rule.quantity, rule.value);
  if (m.num_layers % l.pp != 0) return fmt::format("pp {} does not divide num_layers {}", l.pp, m.num_layers);
  if (const std::string r = replication_problem(m, l.ep, ctx.setup.redundant_experts); !r.empty()) return r;
  if (ctx.setup.global_batch % l.data_replicas() != 0)
    return fmt::format("global batch {} is not divisible by dp {} x ep {} = {} data replicas", ctx.setup.global_batch,
                       l.dp, l.ep, l.data_replicas());
  return "";
}

std::string layout_problem(const PlanContext& ctx, const Layout& l) {
  std::string problem = split_problem(ctx, l);
  if (!problem.empty()) return problem;
  const ModelConfig& m = ctx.model;
  if (l.micro_batch_size < 1 || l.micro_batch_num < 1) return "micro-batch size and count must be >= 1";
  if (l.zero_stage < 0 || l.zero_stage > 3) return fmt::format("zero stage {} is not 0, 1, 2 or 3", l.zero_stage);
  if (l.schedule == PipelineSchedule::kInterleaved) {
    const InterleavedFit fit = interleaved_fit(m.num_layers, l.pp, l.virtual_stages, l.micro_batch_num);
    if (fit.few_stages) return "the interleaved schedule needs pp >= 2";
    if (fit.few_chunks) return "the interleaved schedule needs v >= 2 model chunks per rank";
    if (fit.micro_batches_uneven)
      return fmt::format("the interleaved schedule needs micro_batch_num {} to be a multiple of pp {}", l.micro_batch_num,
                         l.pp);
    if (fit.layers_uneven)
      return fmt::format("pp {} x v {} does not divide num_layers {}", l.pp, l.virtual_stages, m.num_layers);
  } else if (l.virtual_stages != 1) {
    return "virtual stages need the interleaved schedule";
  }
  if (l.dispatcher == MoeDispatcher::kHierarchical && (!m.is_moe() || l.ep < 2))
    return "dispatch=hierarchical (the node-aware expert dispatch) needs an MoE model and ep >= 2";
  if (l.sequence_parallel && ctx.setup.seq_length % l.tp != 0)
    return fmt::format("sequence parallelism needs tp {} to divide seq_length {}", l.tp, ctx.setup.seq_length);
  if (l.cp < 1 || l.data_replicas() % l.cp != 0)
    return fmt::format("cp {} does not divide dp {} x ep {}", l.cp, l.dp, l.ep);
  if (const int unit = 2 * l.cp * (l.sequence_parallel ? l.tp : 1); l.cp > 1 && ctx.setup.seq_length % unit != 0)
    return fmt::format("context parallelism needs seq_length {} divisible by {} (2 x cp{})", ctx.setup.seq_length,
                       unit, l.sequence_parallel ? " x tp" : "");
  const int64_t batch = int64_t{l.dense_replicas()} * l.micro_batch_size * l.micro_batch_num;
  if (batch != ctx.setup.global_batch)
    return fmt::format("dp {} x ep {}{} x mbs {} x mb {} = {} sequences, but the global batch is {}", l.dp, l.ep,
                       l.cp > 1 ? fmt::format(" / cp {}", l.cp) : std::string(), l.micro_batch_size,
                       l.micro_batch_num, batch, ctx.setup.global_batch);
  return "";
}

LayoutEvaluator::LayoutEvaluator(const PlanContext& ctx) : ctx_(ctx) {
  model_flops_per_sequence_ = model_forward_flops_per_sequence(ctx.model, ctx.setup.seq_length);
}

const LayoutEvaluator::ComputeTerms& LayoutEvaluator::compute_terms(const Layout& l) {
  const std::array<int, 5> key = {l.tp, l.ep, l.cp, l.micro_batch_size, l.sequence_parallel ? 1 : 0};
  if (const auto it = compute_terms_.find(key); it != compute_terms_.end()) return it->second;
  const ModelConfig& m = ctx_.model;
  ComputeTerms& t = compute_terms_[key];
  t.dense = layer_compute(m, ctx_.setup, l, ctx_.cluster, false);
  if (m.is_moe()) t.moe = layer_compute(m, ctx_.setup, l, ctx_.cluster, true);
  t.head = head_compute(m, ctx_.setup, l, ctx_.cluster);
  return t;
}

void LayoutEvaluator::fill_stage_params(const Layout& layout) {
  stage_params_.resize(layout.pp);
  for (int s = 0; s < layout.pp; ++s) stage_params_[s] = stage_params(ctx_.model, layout, s);
}

MemoryBreakdown LayoutEvaluator::memory(const Layout& layout) {
  fill_stage_params(layout);
  MemoryBreakdown peak;
  double best = -1;
  for (int s = 0; s < layout.pp; ++s) {
    const MemoryBreakdown mem = stage_memory(ctx_.model, ctx_.setup, layout, ctx_.cluster, s, stage_params_[s]);
    if (mem.total() > best) {
      best = mem.total();
      peak = mem;
    }
  }
  return peak;
}

std::vector<MemoryBreakdown> LayoutEvaluator::stage_memories(const Layout& layout) {
  fill_stage_params(layout);
  std::vector<MemoryBreakdown> out;
  for (int s = 0; s < layout.pp; ++s)
    out.push_back(stage_memory(ctx_.model, ctx_.setup, layout, ctx_.cluster, s, stage_params_[s]));
  return out;
}

double ep_exchange_seconds(const ClusterSpec& c, const ModelConfig& m, const TrainingSetup& setup, const Layout& l,
                           const Placement& place, double tokens) {
  const double a = setup.compute_bytes(), d = m.hidden_size;
  const double rows = device_routed_rows(m, setup, l, tokens);
  if (l.dispatcher != MoeDispatcher::kHierarchical || !place.ep.crosses_nodes())
    return collective_seconds(c, Collective::kAllToAll, place.ep, rows * d * a);
  // Node-aware: stage 1 sends one row per (token, other node), with a quarter of the pair's
  // metadata (hierarchical_pair_bytes: 3k four-byte values over the four moves), to one device per
  // node — an all-to-all over the group's nodes on each device's own NIC, whose buffer includes the
  // share for its own node; stage 2 moves the routed rows inside the node.
  const int nodes = place.ep.nodes, k = m.moe.top_k;
  const double remote_rows = tokens * expected_remote_nodes(m.moe.num_experts, k, nodes) * rows / (tokens * k);
  const double stage1_buffer = remote_rows * (d * a + 3.0 * k) * nodes / (nodes - 1);
  const GroupSpan across{.size = nodes, .nodes = nodes, .per_node = 1};
  const GroupSpan inside{.size = place.ep.per_node, .nodes = 1, .per_node = place.ep.per_node};
  return collective_seconds(c, Collective::kAllToAll, across, stage1_buffer) +
         collective_seconds(c, Collective::kAllToAll, inside, rows * d * a);
}

TimeBreakdown LayoutEvaluator::time(const Layout& l, const Placement& place, std::vector<StageTime>* detail) {
  const ModelConfig& m = ctx_.model;
  const TrainingSetup& setup = ctx_.setup;
  const ClusterSpec& c = ctx_.cluster;
  const double a = setup.compute_bytes();
  // This rank's tokens of a micro-batch: its 1/cp share of each sequence under context parallelism.
  const double tokens = static_cast<double>(l.micro_batch_size) * setup.seq_length / l.cp;
  const double d = m.hidden_size;
  const int chunks = std::max(1, m.moe.a2a_chunks);
  // Context parallelism exchanges the q/k/v of the whole sequences per layer: all-gathered forward,
  // their gradients reduce-scattered backward (model/context_parallel.h; a ring moves the same bytes).
  const double cp_exchange =
      collective_seconds(c, Collective::kAllGather, place.cp, tokens * l.cp * m.qkv_width() / l.tp * a);

  const ComputeTerms& terms = compute_terms(l);
  const LayerCompute& dense = terms.dense;
  const LayerCompute& moe = terms.moe;
  const PassCompute& head = terms.head;

  // Collectives of one micro-batch. Under sequence parallelism every TP all-reduce becomes a
  // reduce-scatter along the sequence and an all-gather (the embedding: reduce-scatter forward,
  // all-gather backward; the head: all-gather forward, reduce-scatter backward): the same bytes.
  // The gathered norm outputs that backward needs again are re-gathered behind the weight-gradient
  // GEMMs as Megatron does (asynchronously), so they are not counted as exposed; nor are the per-step
  // norm-weight gradient all-reduces over TP (a few kB).
  const double tp_ar = l.sequence_parallel
                           ? collective_seconds(c, Collective::kReduceScatter, place.tp, tokens * d * a) +
                                 collective_seconds(c, Collective::kAllGather, place.tp, tokens * d * a)
                           : collective_seconds(c, Collective::kAllReduce, place.tp, tokens * d * a);
  const double tp_small = collective_seconds(c, Collective::kAllReduce, place.tp, tokens * 4);
  // The all-to-all ends when the busiest device has sent and received its rows.
  const double a2a = m.is_moe() ? ep_exchange_seconds(c, m, setup, l, place, tokens) : 0;
  // Stage-to-stage messages as Megatron sends them with TP: each TP rank sends its 1/t share over its
  // own NIC; without sequence parallelism the receiving TP group all-gathers the shares over its
  // links (the scatter/gather optimisation of Narayanan et al. 2021), with it the shard is what the
  // next stage's ranks work on.
  double p2p = 0;
  if (l.pp > 1) {
    p2p = collective_seconds(c, Collective::kSendRecv, place.pp_hop, tokens * d * a / l.tp);
    if (l.tp > 1 && !l.sequence_parallel) p2p += collective_seconds(c, Collective::kAllGather, place.tp, tokens * d * a);
  }
  // Replica slots: their weights come from the homes once per step and their gradients go back
  // once per step (ZeRO 0/1) or per micro-batch (ZeRO-2/3): one all_to_all_v each per MoE layer,
  // averaged over the micro-batches and counted with the dispatch.
  const double replica_move =
      m.is_moe() ? collective_seconds(c, Collective::kAllToAll, place.ep,
                                      replica_transfer_bytes(m, l, setup.redundant_experts) / 2)
                 : 0;
  const double ep_fwd = 2 * a2a + replica_move;  // dispatch + combine (+ replica fetch or return)
  const double ep_fwd_exposed = exposed_behind(ep_fwd, moe.expert_time, chunks);
  const double ep_bwd_exposed = exposed_behind(ep_fwd, 2 * moe.expert_time, chunks);

  const bool full = l.recompute == RecomputeGranularity::kFull;
  const bool selective = l.recompute == RecomputeGranularity::kSelective;
  auto recompute_compute = [&](const LayerCompute& lc) {
    if (full) return lc.forward.time();
    // Selective: the core attention and the gated products; with fused attention the probabilities were
    // never stored, so only the gated products.
    if (selective) return (c.device.fused_attention ? 0 : lc.attention_scores_time) + lc.gated_time;
    return 0.0;
  };

  struct StageTerms {
    double compute = 0, recompute = 0, tp = 0, ep = 0, pp = 0, zero = 0, backward = 0, overhead = 0;
    double ep_total = 0, zero_total = 0;
  };
  StageTerms crit_terms;
  double crit_time = -1;
  stage_time_.resize(l.pp);
  stage_compute_.resize(l.pp);
  const int z = l.zero_stage;
  const double grad_bytes = setup.grad_reduce_bytes();
  TimeBreakdown out;

  double dp_exposed = 0;
  double zero_after_step = 0;
  double optimizer = 0;
  // The optimizer step per parameter of the shard a device owns, at memory bandwidth: the gradient
  // norm for clipping reads the fp32 gradients (4); AdamW reads weight, gradient, m, v and writes
  // weight, m, v (28); mixed precision writes the 16-bit copy (2); fp16 (Megatron's fp16 optimizer)
  // first copies the 16-bit gradients into the fp32 ones (read 2, write 4), unscales them and checks
  // them for inf/nan (read + write, 8); the gradient buffer is zeroed for the next step (4).
  const double optimizer_bytes =
      4 + 28 + 4 + (setup.mixed() ? 2 : 0) + (setup.precision == Precision::kFP16 ? 6 + 8 : 0);
  for (int s = 0; s < l.pp; ++s) {
    const StageParams& sp = stage_params_[s];
    const int n_dense = sp.layers - sp.moe_layers;
    const int n_moe = sp.moe_layers;
    StageTerms st;
    const double fwd_compute = n_dense * dense.forward.time() + n_moe * moe.forward.time() +
                               (sp.has_head ? head.time() : 0) +
                               (sp.has_embedding ? 2 * tokens * d * a / c.device.memory_bandwidth : 0);
    st.compute = 3 * fwd_compute + n_dense * (dense.backward_extra + dense.backward_elementwise_extra) +
                 n_moe * (moe.backward_extra + moe.backward_elementwise_extra);
    st.overhead = 3 * (n_dense * dense.forward.overhead_time + n_moe * moe.forward.overhead_time +
                       (sp.has_head ? head.overhead_time : 0));
    st.recompute = n_dense * recompute_compute(dense) + n_moe * recompute_compute(moe);
    const int layers = sp.layers;
    double tp = 4 * layers * tp_ar;  // two all-reduces forward, two backward per layer
    if (full) tp += 2 * layers * tp_ar;
    if (sp.has_embedding) tp += tp_ar;                 // vocab-parallel embedding output
    if (sp.has_head) tp += tp_ar + 3 * tp_small;       // head input gradient; CE max, sum, target logit
    st.tp = l.tp > 1 ? tp : 0;
    // The CP exchange sits on attention's critical path like TP's: counted with it.
    if (l.cp > 1) st.tp += layers * cp_exchange * (full ? 3 : 2);
    st.ep = n_moe * (ep_fwd_exposed + ep_bwd_exposed + (full ? ep_fwd_exposed : 0));
    st.ep_total = n_moe * ep_fwd * (full ? 3 : 2);
    st.pp = l.pp > 1 ? 2.0 * l.virtual_stages * p2p : 0;
    st.backward = st.compute - fwd_compute + st.recompute;

    // Data-parallel traffic of this stage's parameters.
    const double dense_params = sp.dense;
    const double expert_params = sp.experts;
    // Buckets of this stage's groups as the runtime cuts them (by count or by size).
    const int buckets = std::max(1, std::max(setup.bucket_count(dense_params, l.dp * l.ep),
                                             setup.bucket_count(expert_params, l.dp)));
    auto over_groups = [&](Collective coll, double bytes_per_param) {
      return collective_seconds(c, coll, place.data, dense_params * bytes_per_param) +
             collective_seconds(c, coll, place.dp, expert_params * bytes_per_param);
    };
    double stage_dp = 0;
    double stage_ag = 0;
    if (z == 0) {
      stage_dp = over_groups(Collective::kAllReduce, grad_bytes);
    } else if (z == 1) {
      stage_dp = over_groups(Collective::kReduceScatter, grad_bytes);
      stage_ag = over_groups(Collective::kAllGather, 4);
    } else if (z == 2) {
      // Gradients are sharded, so each micro-batch's are reduce-scattered during its backward.
      const double rs = over_groups(Collective::kReduceScatter, grad_bytes);
      st.zero = exposed_buckets(rs, st.backward, buckets, setup.overlap_grad_reduce);
      st.zero_total = rs;
      stage_ag = over_groups(Collective::kAllGather, 4);
    } else {
      // ZeRO-3: gather the weights for forward and again for backward, reduce-scatter the gradients;
      // each layer's gather is prefetched behind the previous layer's compute except the first.
      const double ag = over_groups(Collective::kAllGather, a);
      const double rs = over_groups(Collective::kReduceScatter, grad_bytes);
      const double per_layer = 1.0 / std::max(1, layers);
      st.zero = std::max(0.0, ag - fwd_compute) + ag * per_layer + std::max(0.0, ag + rs - st.backward) +
                (ag + rs) * per_layer;
      st.zero_total = 2 * ag + rs;
    }
    // The last backward of stage s ends about s backward slots before stage 0's.
    const double slack = s * st.backward;
    dp_exposed = std::max(dp_exposed, exposed_buckets(stage_dp, st.backward + slack, buckets,
                                                      setup.overlap_grad_reduce));
    out.dp_comm_total = std::max(out.dp_comm_total, stage_dp);
    zero_after_step = std::max(zero_after_step, stage_ag);
    const double opt_params = z >= 1 ? dense_params / (l.dp * l.ep) + expert_params / l.dp : dense_params + expert_params;
    optimizer = std::max(optimizer, opt_params * optimizer_bytes / c.device.memory_bandwidth);

    stage_time_[s] = st.compute + st.recompute + st.tp + st.ep + st.pp + st.zero;
    stage_compute_[s] = st.compute + st.recompute;
    if (detail) {
      const double mbs = l.micro_batch_num;
      StageTime row;
      row.stage = s;
      row.layers = sp.layers;
      row.moe_layers = n_moe;
      row.embedding = sp.has_embedding;
      row.head = sp.has_head;
      auto scaled = [&](double dense_part, double moe_part) { return 3 * mbs * (n_dense * dense_part + n_moe * moe_part); };
      row.gemms.qkv = scaled(dense.gemms.qkv, moe.gemms.qkv);
      row.gemms.attention = scaled(dense.gemms.attention, moe.gemms.attention) +
                            mbs * (n_dense * dense.backward_extra + n_moe * moe.backward_extra);
      row.gemms.output = scaled(dense.gemms.output, moe.gemms.output);
      row.gemms.ffn = scaled(dense.gemms.ffn, moe.gemms.ffn);
      row.gemms.router = scaled(dense.gemms.router, moe.gemms.router);
      row.gemms.experts = scaled(dense.gemms.experts, moe.gemms.experts);
      row.gemms.shared_experts = scaled(dense.gemms.shared_experts, moe.gemms.shared_experts);
      row.head_gemm = sp.has_head ? 3 * mbs * head.gemm_time : 0;
      row.kernel_overhead = mbs * st.overhead;
      row.memory_bound = mbs * st.compute - row.gemms.sum() - row.head_gemm - row.kernel_overhead;
      row.recompute = mbs * st.recompute;
      row.tp_exposed = mbs * st.tp;
      row.ep_exposed = mbs * st.ep;
      row.ep_hidden = mbs * (st.ep_total - st.ep);
      row.pp_exposed = mbs * st.pp;
      row.zero_exposed = mbs * st.zero;
      row.zero_hidden = mbs * (st.zero_total - st.zero);
      row.busy = mbs * stage_time_[s];
      const double dp = exposed_buckets(stage_dp, st.backward + slack, buckets, setup.overlap_grad_reduce);
      row.dp_exposed = dp;
      row.dp_hidden = stage_dp - dp;
      row.param_gather = stage_ag;
      row.optimizer = opt_params * optimizer_bytes / c.device.memory_bandwidth;
      detail->push_back(row);
    }
    if (stage_time_[s] > crit_time) {
      crit_time = stage_time_[s];
      crit_terms = st;
    }
  }
  const PipelineTime pipe = pipeline_time(l.schedule, l.micro_batch_num, l.virtual_stages, stage_time_.data(), l.pp);
  // Stragglers: every device's compute runs at its own speed and the step is synchronous (each
  // micro-batch waits for its TP group and its neighbour stages, the step for the data-parallel
  // reduction), so the pipeline runs at the slowest device's pace: the expected maximum of N speeds
  // with relative standard deviation sigma, 1 + sigma sqrt(2 ln N) (the Gaussian extreme-value bound).
  const double slow = straggler_factor(c.device.speed_variation, l.world());
  double straggler = 0;
  if (slow > 1) {
    std::vector<double>& slowed = slowed_time_;
    slowed.assign(stage_time_.begin(), stage_time_.end());
    for (int s = 0; s < l.pp; ++s) slowed[s] += (slow - 1) * stage_compute_[s];
    straggler = pipeline_time(l.schedule, l.micro_batch_num, l.virtual_stages, slowed.data(), l.pp).total - pipe.total;
  }
  // Per step, after the pipeline: the tied embedding's gradient all-reduce between the first and last
  // stage (Megatron's embedding group, fp32 [V/t, d]), and the scalar all-reduces of the step (the
  // gradient norm for clipping over every rank, the loss average over the data replicas).
  double step_sync = 2 * scalar_all_reduce_seconds(c, l.world());
  if (l.pp > 1 && m.tie_embeddings) {
    const GroupSpan ends{2, place.pp_hop.nodes, 1};
    step_sync += collective_seconds(c, Collective::kAllReduce, ends, m.vocab_size / double(l.tp) * d * grad_bytes);
  }
  if (detail)
    for (StageTime& row : *detail) {
      row.idle = std::max(0.0, pipe.total - row.busy);
      row.straggler = straggler;
      row.step_sync = step_sync;
    }
  const double mb = l.micro_batch_num;
  out.critical_stage = pipe.critical_stage;
  out.compute = mb * crit_terms.compute;
  out.recompute = mb * crit_terms.recompute;
  out.tp_comm = mb * crit_terms.tp;
  out.ep_comm = mb * crit_terms.ep;
  out.pp_comm = mb * crit_terms.pp;
  out.zero_comm = mb * crit_terms.zero + zero_after_step;
  out.ep_comm_total = mb * crit_terms.ep_total;
  out.zero_comm_total = mb * crit_terms.zero_total + zero_after_step;
  out.bubble = pipe.bubble;
  out.dp_comm = dp_exposed;
  out.optimizer = optimizer;
  out.kernel_overhead = mb * crit_terms.overhead;
  out.straggler = straggler;
  out.step_sync = step_sync;
  out.step = pipe.total + straggler + dp_exposed + zero_after_step + step_sync + optimizer;
  return out;
}

Evaluation LayoutEvaluator::evaluate_with_memory(const Layout& layout, const MemoryBreakdown& mem,
                                                 const Placement* placement) {
  Evaluation e;
  e.layout = layout;
  e.memory = mem;
  e.memory_limit = memory_limit(ctx_.cluster);
  e.fits = mem.total() <= e.memory_limit;
  e.placement = placement ? *placement : compute_placement(layout, ctx_.cluster.devices_per_node);
  e.time = time(layout, e.placement);
  const double sequences = static_cast<double>(ctx_.setup.global_batch);
  e.tokens_per_second = sequences * ctx_.setup.seq_length / e.time.step;
  e.mfu = 3 * model_flops_per_sequence_ * sequences /
          (e.time.step * layout.world() * ctx_.cluster.peak_flops(ctx_.setup.precision));
  return e;
}

std::vector<StageTime> LayoutEvaluator::stage_times(const Layout& layout) {
  fill_stage_params(layout);
  std::vector<StageTime> rows;
  rows.reserve(layout.pp);
  time(layout, compute_placement(layout, ctx_.cluster.devices_per_node), &rows);
  return rows;
}

Evaluation LayoutEvaluator::evaluate(const Layout& layout) {
  const MemoryBreakdown mem = memory(layout);  // also fills stage_params_ for time()
  return evaluate_with_memory(layout, mem);
}

}  // namespace moe4d
