// plan/compute_model.cc — GEMM lists per layer and their times.
#include "plan/compute_model.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "plan/memory_model.h"
#include "plan/param_count.h"

namespace moe4d {

double wave_utilisation(int units, double m, double n, double count) {
  if (units <= 0) return 1;
  double best = 0;
  for (const auto& [rows, cols] : {std::pair{kTileRows, kTileCols}, std::pair{kTileCols, kTileRows}}) {
    const double tiles = count * std::ceil(m / rows) * std::ceil(n / cols);
    if (tiles < units) return 1;  // under one wave: the efficiency curve's small sizes
    best = std::max(best, tiles / (std::ceil(tiles / units) * units));
  }
  return best;
}

double gemm_compute_seconds(const ClusterSpec& cluster, Precision precision, double m, double n, double k,
                            double count) {
  if (m <= 0 || n <= 0 || k <= 0 || count <= 0) return 0;
  const double size = std::cbrt(m * n * k);
  const double efficiency = cluster.gemm_efficiency(size, precision) * wave_utilisation(cluster.device.compute_units, m, n, count);
  return count * 2 * m * n * k / (cluster.peak_flops(precision) * efficiency);
}

double gemm_seconds(const ClusterSpec& cluster, Precision precision, double m, double n, double k, double count) {
  if (m <= 0 || n <= 0 || k <= 0 || count <= 0) return 0;
  // Roofline: a GEMM cannot run faster than it reads A and B and writes C once.
  const double element = precision == Precision::kFP32 ? 4 : 2;
  const double traffic = (m * k + k * n + m * n) * element / cluster.device.memory_bandwidth;
  return std::max(gemm_compute_seconds(cluster, precision, m, n, k, count), count * traffic);
}

LayerCompute layer_compute(const ModelConfig& model, const TrainingSetup& setup, const Layout& layout,
                           const ClusterSpec& cluster, bool moe_layer) {
  const Precision p = setup.precision;
  const double b = layout.micro_batch_size;
  const double s = setup.seq_length;
  const double tokens = b * s / layout.cp;  // this rank's share under context parallelism
  const double d = model.hidden_size;
  const double f = model.ffn_hidden_size;
  const double fe = model.expert_ffn();
  const double fs = model.shared_ffn();
  const double t = layout.tp;
  const double heads = model.num_heads / t;
  const double hd = model.head_dim();
  LayerCompute out;
  PassCompute& fw = out.forward;
  // on_chip: the blocks of an attention kernel whose operands stay in on-chip memory or cache (flash
  // attention; the runtime's 64-row blocks) have no roofline of their own.
  auto add = [&](double m, double n, double k, double count, bool on_chip = false) {
    fw.flops += count * 2 * m * n * k;
    const double seconds = on_chip ? gemm_compute_seconds(cluster, p, m, n, k, count) : gemm_seconds(cluster, p, m, n, k, count);
    fw.gemm_time += seconds;
    return seconds;
  };
  GemmClasses& g = out.gemms;
  const bool fused = cluster.device.fused_attention;
  const bool square = !fused && cluster.device.square_attention;
  // Per head: the width of q and k (scores) and of v (weighted sum); MLA's differ.
  double qk_dim = hd, v_dim = hd;
  if (model.is_mla()) {
    const MlaConfig& mla = model.mla;
    qk_dim = mla.qk_head_dim();
    v_dim = mla.v_head_dim;
    const double q_in = mla.q_lora_rank > 0 ? mla.q_lora_rank : d;
    if (mla.q_lora_rank > 0) g.qkv += add(tokens, mla.q_lora_rank, d, 1);  // q_a (replicated over TP)
    g.qkv += add(tokens, heads * qk_dim, q_in, 1)                            // q_b (or q)
             + add(tokens, mla.kv_lora_rank + mla.qk_rope_head_dim, d, 1)    // kv_a (replicated)
             + add(tokens, heads * (mla.qk_nope_head_dim + v_dim), mla.kv_lora_rank, 1);  // kv_b
  } else {
    g.qkv = add(tokens, model.qkv_width() / t, d, 1);             // qkv (grouped-query: h + 2 kvh heads)
  }
  // Context parallelism: fused (ring) attention computes this rank's queries, 1/cp of the causal
  // blocks with load-balanced chunks; the runtime's all-gather form computes the whole sequences.
  const double core = fused ? b * heads / layout.cp : b * heads;
  if (square) {
    // The whole S x S square per (sequence, head), the masked half included (batched GEMMs).
    g.attention = add(s, s, qk_dim, b * heads) + add(s, v_dim, s, b * heads);
  } else {
    // Causal attention per (sequence, head) in query blocks: block [r0, r1) only meets keys [0, r1).
    for (double r0 = 0; r0 < s; r0 += kCausalBlock) {
      const double r1 = std::min(s, r0 + kCausalBlock);
      g.attention += add(r1 - r0, r1, qk_dim, core, true);         // q k^T
      g.attention += add(r1 - r0, v_dim, r1, core, true);          // probs v
    }
  }
  out.attention_scores_time = g.attention;
  g.output = add(tokens, d, heads * v_dim, 1);                    // W_o
  if (moe_layer) {
    const double e_local = model.moe.num_experts / static_cast<double>(layout.ep);
    const double rows = device_routed_rows(model, setup, layout, tokens) / e_local;  // per local expert
    g.router = add(layout.sequence_parallel ? tokens / t : tokens, model.moe.num_experts, d, 1);  // (SP: on the shard)
    g.experts = add(rows, fe / t, d, 2 * e_local)                  // W1, W3
                + add(rows, d, fe / t, e_local);                   // W2
    out.expert_time = g.experts;
    g.shared_experts = add(tokens, fs / t, d, 2)                   // shared experts W1, W3 (all tokens)
                       + add(tokens, d, fs / t, 1);                // shared experts W2
  } else {
    g.ffn = add(tokens, f / t, d, 2)                               // W1, W3
            + add(tokens, d, f / t, 1);                            // W2
  }
  const LayerActivations act = layer_activations(model, setup, layout, moe_layer, fused);
  // Fused attention's backward rebuilds the probabilities: QK^T (half of the forward attention GEMMs) again.
  if (fused) out.backward_extra = g.attention / 2;
  const double bandwidth = cluster.device.memory_bandwidth;
  const double a = setup.compute_bytes();
  const double shard = layout.sequence_parallel ? t : 1;
  // Passes over the stored probabilities: the softmax reads the scores and writes them (2); dropout
  // reads them, writes them and a one-byte mask (2 + 1/a). On a square-attention stack the backward is
  // counted as it runs — the softmax's reads the probabilities and their gradient and writes one (3),
  // dropout's reads the gradient and the mask and writes one (2 + 1/a) — rather than as twice the
  // forward (moe4d's runtime keeps the 2 x rule its calibration was measured with).
  const double score_passes = 2 + (setup.dropout ? 2 + 1 / a : 0);
  double elementwise = 2 * (act.full - act.probs) + score_passes * act.probs;
  // Hidden dropout after W_o and W2 writes a one-byte mask of [T, d] (sequence shard under SP) each.
  if (setup.dropout) elementwise += 2 * tokens * d / shard;
  fw.elementwise_time = elementwise / bandwidth;
  if (square) out.backward_elementwise_extra = (score_passes + 1 - 2 * score_passes) * act.probs / bandwidth;
  out.attention_scores_time += score_passes * act.probs / bandwidth;
  out.gated_time = 2 * act.gated / bandwidth;
  // Kernels of one forward (backward: two per forward kernel, the 2 x rule): norm, qkv, RoPE, the
  // attention core, W_o, residual add, norm, the FFN or the MoE block, residual add.
  double kernels = 7 + (fused ? 1 : 3 + (setup.dropout ? 1 : 0));
  if (moe_layer) {
    // Router GEMM, softmax, top-k, permute, grouped W1/W3, activation, grouped W2, unpermute, shared experts.
    kernels += 8 + (fs > 0 ? 4 : 0);
  } else {
    kernels += 4;  // W1 (with W3), activation, W2 and its bias
  }
  fw.overhead_time = kernels * cluster.device.kernel_overhead;
  return out;
}

PassCompute head_compute(const ModelConfig& model, const TrainingSetup& setup, const Layout& layout,
                         const ClusterSpec& cluster) {
  const double tokens = static_cast<double>(layout.micro_batch_size) * setup.seq_length / layout.cp;
  const double d = model.hidden_size;
  const double vocab = model.vocab_size / static_cast<double>(layout.tp);
  PassCompute out;
  out.flops = 2 * tokens * vocab * d;
  out.gemm_time = gemm_seconds(cluster, setup.precision, tokens, vocab, d);
  // Norm in/out, then softmax over the fp32 logits (read twice, written once).
  out.elementwise_time = (2 * tokens * d * setup.compute_bytes() + 3 * tokens * vocab * 4) / cluster.device.memory_bandwidth;
  // Final norm, the GEMM, the vocabulary-parallel cross-entropy (max, exp-sum, target logit, loss, mean).
  out.overhead_time = 7 * cluster.device.kernel_overhead;
  return out;
}

double model_forward_flops_per_sequence(const ModelConfig& model, int seq_length) {
  const double s = seq_length;
  const double d = model.hidden_size;
  const double f = model.ffn_hidden_size;
  const double fe = model.expert_ffn();
  const double n_moe = static_cast<double>(moe_layers_in(model, 0, model.num_layers));
  const double n_dense = model.num_layers - n_moe;
  // The attention core per head: scores over q/k's width, the weighted sum over v's.
  const double core = model.is_mla() ? 2 * s * s * model.num_heads * (model.mla.qk_head_dim() + model.mla.v_head_dim)
                                     : 2 * s * s * model.attn_width() * 2;
  double flops = model.num_layers *
                 (2 * s * (model.attention_sharded_weights() + model.attention_replicated_weights()) + core);
  flops += n_moe * (2 * s * d * model.moe.num_experts + model.moe.top_k * 3 * 2 * s * d * fe +
                    3 * 2 * s * d * model.shared_ffn());
  flops += n_dense * 3 * 2 * s * d * f;
  return flops + 2 * s * d * model.vocab_size;
}

}  // namespace moe4d
