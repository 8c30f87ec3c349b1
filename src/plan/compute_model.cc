// plan/compute_model.cc — GEMM lists per layer and their times.
#include "plan/compute_model.h"

#include <algorithm>
#include <cmath>

#include "plan/memory_model.h"
#include "plan/param_count.h"

namespace moe4d {

double gemm_seconds(const ClusterSpec& cluster, Precision precision, double m, double n, double k, double count) {
  if (m <= 0 || n <= 0 || k <= 0 || count <= 0) return 0;
  const double size = std::cbrt(m * n * k);
  return count * 2 * m * n * k / (cluster.peak_flops(precision) * cluster.gemm_efficiency(size, precision));
}

LayerCompute layer_compute(const ModelConfig& model, const TrainingSetup& setup, const Layout& layout,
                           const ClusterSpec& cluster, bool moe_layer) {
  const Precision p = setup.precision;
  const double b = layout.micro_batch_size;
  const double s = setup.seq_length;
  const double tokens = b * s;
  const double d = model.hidden_size;
  const double f = model.ffn_hidden_size;
  const double fe = model.expert_ffn();
  const double fs = model.shared_ffn();
  const double t = layout.tp;
  const double heads = model.num_heads / t;
  const double hd = model.head_dim();
  LayerCompute out;
  PassCompute& fw = out.forward;
  auto add = [&](double m, double n, double k, double count) {
    fw.flops += count * 2 * m * n * k;
    const double seconds = gemm_seconds(cluster, p, m, n, k, count);
    fw.gemm_time += seconds;
    return seconds;
  };
  GemmClasses& g = out.gemms;
  g.qkv = add(tokens, model.qkv_width() / t, d, 1);               // qkv (grouped-query: h + 2 kvh heads)
  // Causal attention per (sequence, head) in query blocks: block [r0, r1) only meets keys [0, r1).
  for (double r0 = 0; r0 < s; r0 += kCausalBlock) {
    const double r1 = std::min(s, r0 + kCausalBlock);
    g.attention += add(r1 - r0, r1, hd, b * heads);                // q k^T
    g.attention += add(r1 - r0, hd, r1, b * heads);                // probs v
  }
  out.attention_scores_time = g.attention;
  g.output = add(tokens, d, d / t, 1);                            // W_o
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
  const LayerActivations act = layer_activations(model, setup, layout, moe_layer, cluster.device.fused_attention);
  // Fused attention's backward rebuilds the probabilities: QK^T (half of the forward attention GEMMs) again.
  if (cluster.device.fused_attention) out.backward_extra = g.attention / 2;
  const double bandwidth = cluster.device.memory_bandwidth;
  fw.elementwise_time = 2 * act.full / bandwidth;
  out.attention_scores_time += 2 * act.probs / bandwidth;
  out.gated_time = 2 * act.gated / bandwidth;
  return out;
}

PassCompute head_compute(const ModelConfig& model, const TrainingSetup& setup, const Layout& layout,
                         const ClusterSpec& cluster) {
  const double tokens = static_cast<double>(layout.micro_batch_size) * setup.seq_length;
  const double d = model.hidden_size;
  const double vocab = model.vocab_size / static_cast<double>(layout.tp);
  PassCompute out;
  out.flops = 2 * tokens * vocab * d;
  out.gemm_time = gemm_seconds(cluster, setup.precision, tokens, vocab, d);
  // Norm in/out, then softmax over the fp32 logits (read twice, written once).
  out.elementwise_time = (2 * tokens * d * setup.compute_bytes() + 3 * tokens * vocab * 4) / cluster.device.memory_bandwidth;
  return out;
}

double model_forward_flops_per_sequence(const ModelConfig& model, int seq_length) {
  const double s = seq_length;
  const double d = model.hidden_size;
  const double f = model.ffn_hidden_size;
  const double fe = model.expert_ffn();
  const double n_moe = static_cast<double>(moe_layers_in(model, 0, model.num_layers));
  const double n_dense = model.num_layers - n_moe;
  double flops = model.num_layers * (2 * s * d * model.qkv_width() + 2 * s * s * d * 2 + 2 * s * d * d);
  flops += n_moe * (2 * s * d * model.moe.num_experts + model.moe.top_k * 3 * 2 * s * d * fe +
                    3 * 2 * s * d * model.shared_ffn());
  flops += n_dense * 3 * 2 * s * d * f;
  return flops + 2 * s * d * model.vocab_size;
}

}  // namespace moe4d
