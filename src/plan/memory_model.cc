// plan/memory_model.cc — per-device memory of a layout (formulas in plan/memory_model.h).
#include "plan/memory_model.h"

#include <algorithm>
#include <cmath>

#include "plan/schedule_model.h"
#include "plan/replication_model.h"

namespace moe4d {

double routed_rows(const ModelConfig& m, double tokens) {
  if (!m.is_moe()) return 0;
  const double k = m.moe.top_k;
  const double slots = tokens * k;
  if (!m.moe.capacity_factor) return slots;
  const double e = m.moe.num_experts;
  const double capacity = std::ceil(slots * *m.moe.capacity_factor / e);
  return std::min(slots, e * capacity);
}

double device_routed_rows(const ModelConfig& m, const TrainingSetup& setup, const Layout& layout, double tokens) {
  return routed_rows(m, tokens) *
         (layout.ep > 1 ? replicated_imbalance(m, setup.expert_imbalance, layout.ep, setup.redundant_experts) : 1.0);
}

LayerActivations layer_activations(const ModelConfig& m, const TrainingSetup& setup, const Layout& layout,
                                   bool moe_layer, bool fused_attention) {
  const double b = layout.micro_batch_size;
  const double s = setup.seq_length;
  const double tokens = b * s / layout.cp;  // this rank's share under context parallelism
  const double d = m.hidden_size;
  const double f = m.ffn_hidden_size;
  const double fe = m.expert_ffn();
  const double fs = m.shared_ffn();
  const double t = layout.tp;
  const double a = setup.compute_bytes();
  const double f32 = 4;
  // Sequence parallelism keeps the tensors outside the TP regions (residual stream, norms and their
  // outputs) as 1/t sequence shards; the norm outputs' gathered copies live only in the workspace.
  const double shard = layout.sequence_parallel ? t : 1;
  LayerActivations out;
  // Fused (flash) attention keeps one fp32 log-sum-exp per query row and head instead of the probabilities.
  // Context parallelism: fused (ring) attention keeps the rank's own rows; the runtime's all-gather
  // form (model/context_parallel.h) keeps the whole sequences' q/k/v and probabilities.
  out.probs = fused_attention ? b * (m.num_heads / t) * s / layout.cp * f32 : b * (m.num_heads / t) * s * s * a;
  const double qkv_tokens = fused_attention ? tokens : b * s;
  // MLA (model/mla_block.cc) keeps its latents for all tokens on every TP rank — q_a's output and its
  // norm, kv_a's output, its latent part and that part's norm — and its heads [q; k; v] padded to
  // max(qk_nope + qk_rope, v_head_dim) each.
  double qkv_width = m.qkv_width() / t, core_out = m.attn_width() / t;
  if (m.is_mla()) {
    const MlaConfig& mla = m.mla;
    const double head = std::max(mla.qk_head_dim(), mla.v_head_dim);
    qkv_width = 2.0 * mla.q_lora_rank + mla.kv_lora_rank + mla.qk_rope_head_dim + 2.0 * mla.kv_lora_rank +
                m.num_heads / t * 3 * head;
    core_out = m.num_heads / t * mla.v_head_dim;
  }
  double attention = tokens * d * a / shard                      // layer input
                     + (tokens * f32 + tokens * d * a) / shard   // norm rstd + normed input
                     + qkv_tokens * qkv_width * a                // qkv (h + 2 kvh heads; MLA above)
                     + (m.qk_norm ? tokens * (m.num_heads + m.kv_heads()) / t * (m.head_dim() * a + f32) : 0)  // q/k before their norms, rstd
                     + out.probs                                 // softmax probabilities
                     + tokens * core_out * a                     // attention output before W_o
                     + tokens * d * a / shard                    // residual after attention
                     + (tokens * f32 + tokens * d * a) / shard;  // second norm rstd + normed
  double ffn = 0;
  if (moe_layer) {
    const double e = m.moe.num_experts;
    const double k = m.moe.top_k;
    const double rows = device_routed_rows(m, setup, layout, tokens);
    out.gated = (rows * fe + tokens * fs) / t * a;
    // Under SP the router runs on the shard: logits and probabilities [T/t, E]; the gathered top-k
    // decisions of all T tokens are kept with the shard's own copy of them.
    ffn = 2 * tokens * e * f32 / shard                              // router logits and probabilities
          + tokens * k * (4 + f32) * (shard > 1 ? 1 + 1 / shard : 1)  // top-k indices and weights
          + rows * d * a                  // permuted tokens
          + 3 * rows * fe / t * a         // W1, W3 outputs and gated product
          + rows * d * a                  // expert outputs
          + 3 * tokens * fs / t * a;      // shared experts' W1, W3 outputs and gated product
  } else {
    out.gated = tokens * f / t * a;
    ffn = 3 * tokens * f / t * a;
  }
  out.full = attention + ffn;
  switch (layout.recompute) {
    case RecomputeGranularity::kNone: out.saved = out.full; break;
    // Selective recompute drops what is cheap to rebuild and large: the probabilities (fused attention has
    // none to drop; its statistics stay) and the gated products.
    case RecomputeGranularity::kSelective:
      out.saved = out.full - (fused_attention ? 0 : out.probs) - out.gated;
      break;
    case RecomputeGranularity::kFull: out.saved = tokens * d * a / shard; break;
  }
  return out;
}

double head_activation_bytes(const ModelConfig& m, const TrainingSetup& setup, const Layout& layout) {
  const double tokens = static_cast<double>(layout.micro_batch_size) * setup.seq_length / layout.cp;
  const double d = m.hidden_size;
  const double a = setup.compute_bytes();
  const double shard = layout.sequence_parallel ? layout.tp : 1;  // the final norm runs on the sequence shard
  return (2 * tokens * d * a + tokens * 4) / shard + tokens * (m.vocab_size / static_cast<double>(layout.tp)) * 4;
}

bool own_runtime(const DeviceSpec& device) { return !device.fused_attention && !device.square_attention; }

double runtime_stage_bytes(const ModelConfig& m, const TrainingSetup& setup, const Layout& layout, double in_flight,
                           double head_in_flight) {
  // fp32, as the runtime stores the residual stream and the stage-to-stage messages in every precision.
  const double width = static_cast<double>(layout.micro_batch_size) * setup.seq_length / layout.cp * m.hidden_size *
                       4 / (layout.sequence_parallel ? layout.tp : 1);
  // Chunks in flight: in_flight counts micro-batches of the whole stage, v chunks each under
  // interleaving; the head chunk's output is the head's input, counted in head_activation_bytes.
  const double chunks = in_flight * (layout.schedule == PipelineSchedule::kInterleaved ? layout.virtual_stages : 1);
  return (chunks - head_in_flight) * width + width;
}

MemoryBreakdown stage_memory(const ModelConfig& m, const TrainingSetup& setup, const Layout& layout,
                             const ClusterSpec& cluster, int stage, const StageParams& params) {
  MemoryBreakdown mem;
  mem.stage = stage;
  const double dense_group = layout.dp * layout.ep;
  const double expert_group = layout.dp;
  const int z = layout.zero_stage;
  auto sharded = [&](bool shard) {
    return params.dense / (shard ? dense_group : 1) + params.experts / (shard ? expert_group : 1);
  };
  mem.weights = 4 * sharded(z >= 3);
  mem.weights16 = setup.mixed() ? 2 * sharded(z >= 3) : 0;
  mem.gradients = 4 * sharded(z >= 2);
  mem.optimizer = 8 * sharded(z >= 1);
  // Buckets as the runtime cuts them (train/zero_layout.h).
  const double dense_bucket = setup.bucket_elements(params.dense, int(dense_group));
  const double expert_bucket = setup.bucket_elements(params.experts, int(expert_group));
  const double bucket = std::max(dense_bucket, expert_bucket);
  const double local_params = params.dense + params.experts;
  if (z >= 3) {
    // ZeRO-3 holds the buckets of the weight a block is reading — the largest single read on the
    // stage, as many whole buckets as a range of its length can touch — plus zero3_prefetch_buckets
    // per group gathered ahead (train/zero_param_gatherer.h), never more than the whole stage.
    const double d = m.hidden_size, t = layout.tp;
    double read = std::max(d * m.qkv_width() / t, d * m.attn_width() / t);
    if (m.is_mla()) {  // MLA's weights one by one; q_a and kv_a are whole on every TP rank
      const MlaConfig& a = m.mla;
      const double h = m.num_heads, q_in = a.q_lora_rank > 0 ? a.q_lora_rank : d;
      read = std::max({d * a.q_lora_rank, d * (a.kv_lora_rank + a.qk_rope_head_dim), q_in * h * a.qk_head_dim() / t,
                       a.kv_lora_rank * h * (a.qk_nope_head_dim + a.v_head_dim) / t, h * a.v_head_dim * d / t});
    }
    if (params.has_embedding || params.has_head) read = std::max(read, double(m.vocab_size) * d / t);
    if (params.moe_layers < params.layers) read = std::max(read, d * m.ffn_hidden_size / t);
    if (params.moe_layers > 0) {
      read = std::max({read, d * m.expert_ffn() / t, d * m.shared_ffn() / t, d * m.moe.num_experts});
      // The replica fetch copies the layer's three expert weights at once.
      if (setup.redundant_experts > 0)
        read = std::max(read, 3 * double(m.moe.num_experts / layout.ep) * d * m.expert_ffn() / t);
    }
    const auto cover = [&](double b) { return b > 0 ? (std::ceil(read / b) + 1) * b : 0; };
    const double window = dense_bucket + (params.experts > 0 ? expert_bucket : 0);
    const double held = std::max(cover(dense_bucket), cover(expert_bucket)) + setup.zero3_prefetch_buckets * window;
    mem.zero3_gather = std::min(local_params, held) * setup.compute_bytes();
  }
  if (z >= 2) {
    // The blocks report gradients as they write them, in reverse flat order and cut at the buckets'
    // starts rounded down to 16 rows (model/block_matmul.h, kGradRowAlign), so per group the
    // unreduced fp32 gradients are the bucket being filled plus up to 16 gradient rows of the bucket
    // below it; and the GradSync::kMaxInFlight = 2 staged reduce-scatters of a bucket each.
    const double tp = layout.tp;
    double row = std::max({double(m.hidden_size), m.qkv_width() / tp, m.ffn_hidden_size / tp});
    if (m.is_moe()) row = std::max({row, m.expert_ffn() / tp, m.shared_ffn() / tp, double(m.moe.num_experts)});
    if (params.has_head && !m.tie_embeddings) row = std::max(row, m.vocab_size / tp);
    const double groups = params.experts > 0 ? 2 : 1;
    const double open = std::min(local_params, groups * (bucket + 16 * row));
    mem.grad_buckets = 4 * open + 2 * bucket * setup.grad_reduce_bytes();
  }

  const bool fused = cluster.device.fused_attention;
  const LayerActivations dense = layer_activations(m, setup, layout, false, fused);
  const LayerActivations moe = m.is_moe() ? layer_activations(m, setup, layout, true, fused) : LayerActivations{};
  const int dense_layers = params.layers - params.moe_layers;
  const double per_micro_batch = dense_layers * dense.saved + params.moe_layers * moe.saved;
  const double in_flight =
      in_flight_micro_batches(layout.schedule, layout.pp, layout.micro_batch_num, layout.virtual_stages, stage);
  mem.activations = in_flight * per_micro_batch;
  // The head runs on the last chunk of the last stage: only GPipe keeps more than one micro-batch of it.
  const double head_in_flight =
      params.has_head ? (layout.schedule == PipelineSchedule::kGPipe ? layout.micro_batch_num : 1) : 0;
  mem.activations += head_in_flight * head_activation_bytes(m, setup, layout);
  if (own_runtime(cluster.device)) mem.activations += runtime_stage_bytes(m, setup, layout, in_flight, head_in_flight);

  const LayerActivations* biggest = nullptr;
  if (dense_layers > 0) biggest = &dense;
  if (params.moe_layers > 0 && (!biggest || moe.full > biggest->full)) biggest = &moe;
  if (biggest) {
    mem.workspace = biggest->full;
    if (layout.recompute == RecomputeGranularity::kFull) mem.workspace += biggest->full;
    if (layout.recompute == RecomputeGranularity::kSelective) mem.workspace += biggest->probs + biggest->gated;
  }

  const double tokens = static_cast<double>(layout.micro_batch_size) * setup.seq_length / layout.cp;
  const double a = setup.compute_bytes();
  // Stage-to-stage messages: the sequence shard under sequence parallelism.
  if (layout.pp > 1) mem.comm_buffers += 2 * tokens * m.hidden_size * a / (layout.sequence_parallel ? layout.tp : 1);
  if (layout.ep > 1 && params.moe_layers > 0)
    mem.comm_buffers += 2 * device_routed_rows(m, setup, layout, tokens) * m.hidden_size * a;
  // Replica slots: fp32 weights and a gradient buffer per MoE layer, no optimizer state; the home
  // side's send / receive staging for its experts' copies on other devices.
  const double replicas = replica_weight_bytes(m, layout, setup.redundant_experts) * params.moe_layers;
  mem.weights += replicas;
  mem.gradients += replicas;
  if (replicas > 0) {
    const double per_slot = replicas / (setup.redundant_experts / layout.ep);
    mem.comm_buffers += 2 * per_slot *
                        replica_staging_slots(m, setup.expert_imbalance, layout.ep, setup.redundant_experts);
  }
  // ZeRO 0/1 compressed: the kMaxInFlight 16-bit staging buckets of the all-reduce.
  if (z < 2 && setup.grad_compression != GradCompression::kNone) mem.comm_buffers += 2 * bucket * setup.grad_reduce_bytes();
  if (setup.checkpoint_async) mem.checkpoint_staging = 12 * sharded(true);
  mem.reserve = cluster.memory_reserve_fraction * cluster.device.memory_bytes;
  return mem;
}

}  // namespace moe4d
