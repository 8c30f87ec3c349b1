// tests/plan/formulas_test.cc — every planner formula against values computed by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "plan/bottleneck.h"
#include "plan/comm_model.h"
#include "plan/compute_model.h"
#include "plan/layout_evaluator.h"
#include "plan/memory_model.h"
#include "plan/model_presets.h"
#include "plan/param_count.h"
#include "plan_test_util.h"
#include "plan/schedule_model.h"

namespace moe4d {
namespace {

using testing::flat_cluster;
using testing::make_layout;
using testing::tiny_moe;
using testing::tiny_setup;

// ---- parameters --------------------------------------------------------------------------------

TEST(ParamCount, TinyModelByHand) {
  const ModelParamCount c = count_model_params(tiny_moe());
  EXPECT_DOUBLE_EQ(c.attention, 2 * 4 * 8 * 8);      // 512
  EXPECT_DOUBLE_EQ(c.norms, 2 * 2 * 8 + 8);          // 40
  EXPECT_DOUBLE_EQ(c.dense_ffn, 3 * 8 * 16);         // layer 0 only: 384
  EXPECT_DOUBLE_EQ(c.routers, 8 * 4);                // layer 1: 32
  EXPECT_DOUBLE_EQ(c.experts, 4 * 3 * 8 * 16);       // 1536
  EXPECT_DOUBLE_EQ(c.embedding, 32 * 8);
  EXPECT_DOUBLE_EQ(c.head, 32 * 8);
  EXPECT_DOUBLE_EQ(c.dense(), 1480);
  EXPECT_DOUBLE_EQ(c.total(), 3016);
  EXPECT_DOUBLE_EQ(c.active, 1480 + 2 * 384);  // top-2 of the 4 experts
}

// Multi-head latent attention with DeepSeek-V3's shapes (d 7168, 128 heads, q_lora 1536, kv_lora 512,
// qk 128 + 64, v 128): per layer q_a 7168 x 1536, q_b 1536 x 128 x 192, kv_a 7168 x 576, kv_b
// 512 x 128 x 256, o 128 x 128 x 7168 = 187,105,280 weights, and the latent norms 1536 + 512.
TEST(ParamCount, MultiLatentAttentionOfDeepSeekV3) {
  ModelConfig m = tiny_moe();
  m.hidden_size = 7168;
  m.num_heads = 128;
  m.num_kv_heads = 0;
  m.mla = {.q_lora_rank = 1536, .kv_lora_rank = 512, .qk_nope_head_dim = 128, .qk_rope_head_dim = 64,
           .v_head_dim = 128};
  const ModelParamCount c = count_model_params(m);
  EXPECT_DOUBLE_EQ(c.attention, m.num_layers * 187105280.0);
  EXPECT_DOUBLE_EQ(c.norms, m.num_layers * (2 * 7168 + 1536 + 512) + 7168);
  // TP 4 shards q_b, kv_b and o by heads; q_a, kv_a and the latent norms stay whole on every rank.
  const double replicated = 7168.0 * (1536 + 576);
  EXPECT_DOUBLE_EQ(m.attention_replicated_weights(), replicated);
  EXPECT_DOUBLE_EQ(m.attention_sharded_weights(), 187105280.0 - replicated);
  // Forward FLOPs of a 4096-token sequence: 2 s per weight, and per head and layer the scores over
  // 192 and the weighted sum over 128 positions' values.
  const double s = 4096;
  ModelConfig plain = m;  // the same model with multi-head attention of 128 heads of 56
  plain.mla = {};
  const double plain_weights = 7168.0 * 3 * 7168 + 7168.0 * 7168;
  const double expected = m.num_layers * (2 * s * (187105280.0 - plain_weights) + 2 * s * s * 128 * (192 + 128) -
                                          2 * s * s * 7168 * 2);
  const double got = model_forward_flops_per_sequence(m, 4096) - model_forward_flops_per_sequence(plain, 4096);
  EXPECT_NEAR(got, expected, 1e-9 * std::abs(expected));
}

// tiny_moe with multi-query attention (2 query heads on 1 KV head), routed experts of 8 and one
// shared expert of 4.
ModelConfig tiny_options() {
  ModelConfig m = tiny_moe();
  m.num_kv_heads = 1;
  m.moe.expert_ffn_hidden_size = 8;
  m.moe.shared_experts = 1;
  m.moe.shared_expert_ffn_hidden_size = 4;
  return m;
}

TEST(ParamCount, ModelOptionsByHand) {
  const ModelParamCount c = count_model_params(tiny_options());
  EXPECT_DOUBLE_EQ(c.attention, 2 * (8 * (2 + 2) * 4 + 8 * 8));  // W_qkv [8, 16] + W_o: 384
  EXPECT_DOUBLE_EQ(c.dense_ffn, 3 * 8 * 16);                    // layer 0 keeps ffn_hidden_size
  EXPECT_DOUBLE_EQ(c.experts, 4 * 3 * 8 * 8);                   // 768
  EXPECT_DOUBLE_EQ(c.shared_experts, 3 * 8 * 4);                // 96
  EXPECT_DOUBLE_EQ(c.dense(), 384 + 40 + 384 + 96 + 32 + 256 + 256);
  EXPECT_DOUBLE_EQ(c.active, c.dense() + 2 * 3 * 8 * 8);        // shared always, 2 of 4 routed
  // Layer 1 on stage 1 of TP2 x EP2 x PP2: attention 192/2, norms 16, router 32, shared 96/2;
  // experts 2 local x 3 d fe / 2; final norm 8 + head 128.
  const StageParams s1 = stage_params(tiny_options(), make_layout(1, 2, 2, 2, 1, 1), 1);
  EXPECT_DOUBLE_EQ(s1.dense, 96 + 16 + 32 + 48 + 8 + 128);
  EXPECT_DOUBLE_EQ(s1.experts, 2 * 3 * 8 * 8 / 2);
}

// The closed-form MoE-layer count agrees with ModelConfig::is_moe_layer layer by layer.
TEST(ParamCount, MoeLayersInClosedFormMatchesTheLayerRule) {
  ModelConfig m = tiny_moe();
  m.num_layers = 37;
  for (int freq : {1, 2, 3, 5})
    for (int first_dense : {0, 1, 4, 7}) {
      m.moe.layer_freq = freq;
      m.moe.first_dense_layers = first_dense;
      for (int a = 0; a <= m.num_layers; a += 3)
        for (int b = a; b <= m.num_layers; b += 2) {
          int64_t expected = 0;
          for (int l = a; l < b; ++l) expected += m.is_moe_layer(l) ? 1 : 0;
          EXPECT_EQ(moe_layers_in(m, a, b), expected) << "freq " << freq << " first_dense " << first_dense << " [" << a
                                                      << ", " << b << ")";
        }
    }
  m.moe.num_experts = 0;
  EXPECT_EQ(moe_layers_in(m, 0, m.num_layers), 0);
}

// Mixtral-8x7B and DeepSeek-MoE-16B presets have their published sizes.
TEST(ParamCount, PresetsMatchThePublishedModels) {
  const ModelParamCount mixtral = count_model_params(model_preset("mixtral-8x7b").model);
  EXPECT_NEAR(mixtral.total() / 1e9, 46.70, 0.01);
  EXPECT_NEAR(mixtral.active / 1e9, 12.88, 0.01);
  const ModelParamCount deepseek = count_model_params(model_preset("deepseek-moe-16b").model);
  EXPECT_NEAR(deepseek.total() / 1e9, 16.38, 0.01);
  EXPECT_NEAR(deepseek.active / 1e9, 2.83, 0.01);
  EXPECT_GT(deepseek.dense_ffn, 0);  // layer 0
  EXPECT_GT(deepseek.shared_experts, 0);
}

// Qwen3-30B-A3B and Qwen3-235B-A22B: 30.5B / 3.3B active and 235B / 22B active as published; the head
// width 128 (not hidden / heads) in W_qkv and W_o, and the q/k norms.
TEST(ParamCount, Qwen3PresetsMatchThePublishedModels) {
  const ModelConfig small = model_preset("qwen3-30b-a3b").model;
  const ModelParamCount a3b = count_model_params(small);
  EXPECT_NEAR(a3b.total() / 1e9, 30.53, 0.02);
  EXPECT_NEAR(a3b.active / 1e9, 3.34, 0.02);
  EXPECT_DOUBLE_EQ(a3b.attention, 48.0 * (2048.0 * (32 + 2 * 4) * 128 + 32 * 128 * 2048.0));
  EXPECT_DOUBLE_EQ(a3b.norms, 48.0 * (2 * 2048 + 2 * 128) + 2048);
  const ModelParamCount a22b = count_model_params(model_preset("qwen3-235b-a22b").model);
  EXPECT_NEAR(a22b.total() / 1e9, 235.1, 0.2);
  EXPECT_NEAR(a22b.active / 1e9, 22.1, 0.1);
  // model.moe.dense_layers removes MoE layers from the counts.
  ModelConfig m = small;
  m.moe.dense_layers = {0, 47, 47};
  EXPECT_EQ(moe_layers_in(m, 0, 48), 46);
  EXPECT_EQ(moe_layers_in(m, 1, 47), 46);
  EXPECT_GT(count_model_params(m).dense_ffn, 0);
}

TEST(ParamCount, StageParamsShardByTpAndEp) {
  const ModelConfig m = tiny_moe();
  const Layout l = make_layout(1, 2, 2, 2, 1, 1);
  const StageParams s0 = stage_params(m, l, 0);
  // Layer 0 (dense): 4d^2/t + 2d + 3df/t = 128 + 16 + 192; embedding V d / t = 128.
  EXPECT_DOUBLE_EQ(s0.dense, 336 + 128);
  EXPECT_DOUBLE_EQ(s0.experts, 0);
  EXPECT_DOUBLE_EQ(s0.largest_layer, 336);
  EXPECT_EQ(s0.layers, 1);
  EXPECT_EQ(s0.moe_layers, 0);
  EXPECT_TRUE(s0.has_embedding);
  EXPECT_FALSE(s0.has_head);
  const StageParams s1 = stage_params(m, l, 1);
  // Layer 1 (MoE): 128 + 16 + router d E = 32; experts (E/ep) * 3df/t = 2 * 192; final norm 8 + head 128.
  EXPECT_DOUBLE_EQ(s1.dense, 176 + 8 + 128);
  EXPECT_DOUBLE_EQ(s1.experts, 384);
  EXPECT_DOUBLE_EQ(s1.largest_layer, 176 + 384);
  EXPECT_EQ(s1.moe_layers, 1);
  EXPECT_TRUE(s1.has_head);
}

TEST(ParamCount, TiedHeadIsSharedOnlyOnOneStage) {
  ModelConfig m = tiny_moe();
  m.tie_embeddings = true;
  const StageParams one = stage_params(m, make_layout(1, 1, 1, 1, 1, 1), 0);
  EXPECT_DOUBLE_EQ(one.dense, (256 + 16 + 384) + (256 + 16 + 32) + 256 + 8);
  EXPECT_DOUBLE_EQ(one.experts, 1536);
  // With two stages the last one keeps its own copy of the tied matrix.
  const StageParams last = stage_params(m, make_layout(1, 1, 1, 2, 1, 1), 1);
  EXPECT_DOUBLE_EQ(last.dense, (256 + 16 + 32) + 8 + 256);
}

TEST(ParamCount, InterleavedChunksTakeEveryPpthVirtualStage) {
  ModelConfig m = tiny_moe();
  m.num_layers = 8;  // layers 1, 3, 5, 7 are MoE
  Layout l = make_layout(1, 1, 1, 2, 1, 2);
  l.schedule = PipelineSchedule::kInterleaved;
  l.virtual_stages = 2;
  // 2 layers per chunk: stage 0 holds virtual stages 0 and 2 = layers {0,1} and {4,5}.
  const StageParams s0 = stage_params(m, l, 0);
  EXPECT_EQ(s0.layers, 4);
  EXPECT_EQ(s0.moe_layers, 2);
}

// ---- activations and memory -------------------------------------------------------------------

TEST(Memory, RoutedRowsWithAndWithoutCapacity) {
  ModelConfig m = tiny_moe();
  EXPECT_DOUBLE_EQ(routed_rows(m, 10), 20);  // T k
  m.moe.capacity_factor = 1.0;               // ceil(20 / 4) = 5 per expert, 4 experts: 20
  EXPECT_DOUBLE_EQ(routed_rows(m, 10), 20);
  m.moe.capacity_factor = 0.5;               // ceil(2.5) = 3 per expert: 12
  EXPECT_DOUBLE_EQ(routed_rows(m, 10), 12);
}

TEST(Memory, LayerActivationsByHand) {
  const ModelConfig m = tiny_moe();
  const TrainingSetup s = tiny_setup();
  Layout l = make_layout(1, 1, 2, 1, 2, 1);  // b 2, S 4: T 8; tp 2: one local head
  // Attention, fp32: x 256, rstd 32, normed 256, qkv T*3d/t*4 = 384, probs b*1*S*S*4 = 128,
  // attention out T*d/t*4 = 128, residual 256, rstd 32 + normed 256: 1728.
  const LayerActivations dense = layer_activations(m, s, l, false);
  EXPECT_DOUBLE_EQ(dense.probs, 128);
  EXPECT_DOUBLE_EQ(dense.gated, 8 * 8 * 4);
  EXPECT_DOUBLE_EQ(dense.full, 1728 + 3 * 256);
  EXPECT_DOUBLE_EQ(dense.saved, dense.full);
  // MoE: logits + probs 2*T*E*4 = 256, top-k T*k*8 = 128, permuted R*d*4 = 512 (R = 16),
  // W1/W3/gated 3*R*(f/t)*4 = 1536, expert out 512.
  const LayerActivations moe = layer_activations(m, s, l, true);
  EXPECT_DOUBLE_EQ(moe.full, 1728 + 256 + 128 + 512 + 1536 + 512);
  EXPECT_DOUBLE_EQ(moe.gated, 16 * 8 * 4);
  l.recompute = RecomputeGranularity::kSelective;
  EXPECT_DOUBLE_EQ(layer_activations(m, s, l, true).saved, moe.full - 128 - 512);
  l.recompute = RecomputeGranularity::kFull;
  EXPECT_DOUBLE_EQ(layer_activations(m, s, l, true).saved, 8 * 8 * 4);
  // bf16 halves the 16-bit tensors, not the fp32 rstd.
  TrainingSetup half = s;
  half.precision = Precision::kBF16;
  l.recompute = RecomputeGranularity::kNone;
  EXPECT_DOUBLE_EQ(layer_activations(m, half, l, false).full, 128 + 32 + 128 + 192 + 64 + 64 + 128 + 32 + 128 + 384);
  EXPECT_DOUBLE_EQ(head_activation_bytes(m, s, l), 2 * 8 * 8 * 4 + 8 * 4 + 8 * 16 * 4);
}

// Sequence parallelism halves (tp 2) the tensors outside the TP regions: layer input, both norms'
// rstd and outputs, the residual; the router's logits and probs; the full-recompute checkpoint; the
// final norm's input and output.
// Fused (flash) attention keeps the fp32 log-sum-exp [b, h/t, S] instead of the probabilities; selective
// recompute then only drops the gated products; the backward repeats QK^T.
TEST(Memory, FusedAttentionKeepsNoProbabilities) {
  const ModelConfig m = tiny_moe();
  TrainingSetup s = tiny_setup(8);
  Layout l = make_layout(1, 1, 1, 1, 2, 4);
  const LayerActivations plain = layer_activations(m, s, l, false);
  const LayerActivations fused = layer_activations(m, s, l, false, true);
  EXPECT_DOUBLE_EQ(fused.probs, 2 * 2 * 4 * 4.0);  // b 2 x heads 2 x S 4 x fp32
  EXPECT_DOUBLE_EQ(fused.full, plain.full - plain.probs + fused.probs);
  l.recompute = RecomputeGranularity::kSelective;
  EXPECT_DOUBLE_EQ(layer_activations(m, s, l, false, true).saved, fused.full - fused.gated);
  ClusterSpec c = flat_cluster(1, 1);
  const LayerCompute unfused = layer_compute(m, s, l, c, false);
  c.device.fused_attention = true;
  const LayerCompute flash = layer_compute(m, s, l, c, false);
  EXPECT_DOUBLE_EQ(unfused.backward_extra, 0);
  EXPECT_DOUBLE_EQ(flash.backward_extra, flash.gemms.attention / 2);
  EXPECT_LT(flash.attention_scores_time, unfused.attention_scores_time);  // no S x S softmax traffic
}

TEST(Memory, SequenceParallelShardsTheTensorsOutsideTensorParallelRegions) {
  const ModelConfig m = tiny_moe();
  const TrainingSetup s = tiny_setup();
  Layout l = make_layout(1, 1, 2, 1, 2, 1);  // T 8, d 8, tp 2
  const LayerActivations dense = layer_activations(m, s, l, false);
  const LayerActivations moe = layer_activations(m, s, l, true);
  const double head = head_activation_bytes(m, s, l);
  l.sequence_parallel = true;
  // x 256 + rstd 32 + normed 256 + residual 256 + rstd 32 + normed 256 = 1088, halved.
  EXPECT_DOUBLE_EQ(layer_activations(m, s, l, false).full, dense.full - 1088 / 2);
  // The MoE router runs on the shard: logits and probs [T, E] fp32 halved, plus the shard's copy of
  // the top-k indices and weights ([T/2, k], 4 bytes each) next to the gathered ones.
  const double T = 8, E = m.moe.num_experts, k = m.moe.top_k;
  EXPECT_DOUBLE_EQ(layer_activations(m, s, l, true).full, moe.full - 1088 / 2 - 2 * T * E * 4 / 2 + T / 2 * k * 8);
  EXPECT_DOUBLE_EQ(layer_activations(m, s, l, false).probs, dense.probs);  // inside the TP region
  // Final norm input and output 2 * 256 + rstd 32, halved; the vocab-parallel logits unchanged.
  EXPECT_DOUBLE_EQ(head_activation_bytes(m, s, l), head - (2 * 256 + 32) / 2);
  l.recompute = RecomputeGranularity::kFull;
  EXPECT_DOUBLE_EQ(layer_activations(m, s, l, true).saved, 8 * 8 * 4 / 2);
  // PP messages are the shard: send + receive 2 * T * d * 4 / 2.
  Layout piped = make_layout(1, 1, 2, 2, 2, 4);
  const ClusterSpec c = flat_cluster(1, 4);
  const double full_msgs = stage_memory(m, s, piped, c, 0, stage_params(m, piped, 0)).comm_buffers;
  piped.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(stage_memory(m, s, piped, c, 0, stage_params(m, piped, 0)).comm_buffers, full_msgs - 256);
}

// The time model: TP all-reduces become reduce-scatter + all-gather of the same buffer; PP sends go
// as one 1/t share per TP rank, gathered over the TP group's links unless sequence parallel.
TEST(Step, SequenceParallelCollectivesAndPipelineSends) {
  PlanContext ctx{"tiny", tiny_moe(), tiny_setup(8), flat_cluster(1, 4)};
  Layout l = make_layout(1, 1, 2, 2, 1, 8);
  LayoutEvaluator evaluator(ctx);
  const Evaluation without = evaluator.evaluate(l);
  l.sequence_parallel = true;
  const Evaluation with = evaluator.evaluate(l);
  const Placement& place = without.placement;
  const double bytes = double(ctx.setup.seq_length) * ctx.model.hidden_size * 4;  // one sequence, fp32
  const double send = collective_seconds(ctx.cluster, Collective::kSendRecv, place.pp_hop, bytes / 2);
  const double gather = collective_seconds(ctx.cluster, Collective::kAllGather, place.tp, bytes);
  EXPECT_NEAR(without.time.pp_comm, 8 * 2 * (send + gather), 1e-15);
  EXPECT_NEAR(with.time.pp_comm, 8 * 2 * send, 1e-15);
  const double ar = collective_seconds(ctx.cluster, Collective::kAllReduce, place.tp, bytes);
  const double rs_ag = collective_seconds(ctx.cluster, Collective::kReduceScatter, place.tp, bytes) +
                       collective_seconds(ctx.cluster, Collective::kAllGather, place.tp, bytes);
  ASSERT_GT(ar, 0);
  EXPECT_NEAR(with.time.tp_comm / without.time.tp_comm, rs_ag / ar, 1e-9);
  EXPECT_LT(with.memory.activations, without.memory.activations);
}

TEST(Memory, StageMemoryByHandForEachZeroStage) {
  const ModelConfig m = tiny_moe();
  const TrainingSetup s = tiny_setup();
  ClusterSpec c = flat_cluster(1, 4);
  Layout l = make_layout(1, 2, 2, 2, 2, 4);  // 1F1B, 4 micro-batches
  const StageParams p1 = stage_params(m, l, 1);  // dense 312, experts 384
  MemoryBreakdown z0 = stage_memory(m, s, l, c, 1, p1);
  EXPECT_DOUBLE_EQ(z0.weights, 4 * 696);
  EXPECT_DOUBLE_EQ(z0.weights16, 0);
  EXPECT_DOUBLE_EQ(z0.gradients, 4 * 696);
  EXPECT_DOUBLE_EQ(z0.optimizer, 8 * 696);
  // Last stage of 1F1B holds one micro-batch: the MoE layer (4672) and the head (1056); moe4d's
  // runtime (flat_cluster: no fused attention) adds the residual gradient in backward, T*d*4 = 256.
  EXPECT_DOUBLE_EQ(z0.activations, 4672 + 1056 + 256);
  EXPECT_DOUBLE_EQ(z0.workspace, 4672);
  // PP send + receive 2*T*d*4 = 512; EP staging 2*R*d*4 = 1024.
  EXPECT_DOUBLE_EQ(z0.comm_buffers, 512 + 1024);
  EXPECT_DOUBLE_EQ(z0.reserve, 0);
  EXPECT_DOUBLE_EQ(z0.total(), 23328);

  // ZeRO shards over dp*ep = 2 (dense) and dp = 1 (experts): 312/2 + 384 = 540 per group.
  l.zero_stage = 1;
  EXPECT_DOUBLE_EQ(stage_memory(m, s, l, c, 1, p1).optimizer, 8 * 540);
  l.zero_stage = 2;
  const MemoryBreakdown z2 = stage_memory(m, s, l, c, 1, p1);
  EXPECT_DOUBLE_EQ(z2.gradients, 4 * 540);
  EXPECT_DOUBLE_EQ(z2.comm_buffers, 1536);
  // Buckets of a quarter of each group: max(312, 384) / 4 = 96 elements. Open gradients: per group
  // the bucket being filled plus 16 of the longest gradient rows (the head's vocab / tp = 16),
  // 2 x (96 + 256), capped at the stage's 696; plus two staged fp32 buckets.
  EXPECT_DOUBLE_EQ(z2.grad_buckets, 4 * 696 + 2 * 96 * 4);
  l.zero_stage = 3;
  const MemoryBreakdown z3 = stage_memory(m, s, l, c, 1, p1);
  EXPECT_DOUBLE_EQ(z3.weights, 4 * 540);
  // The largest single read is the head, vocab / tp x d = 128 elements (qkv: 96, an expert: 64): as
  // many expert buckets of 96 (312 / 4 dense, 384 / 4 expert) as it can touch, (2 + 1) x 96, plus
  // two prefetched buckets per group, 2 x (78 + 96).
  EXPECT_DOUBLE_EQ(z3.zero3_gather, (3 * 96 + 2 * (78 + 96)) * 4);
  EXPECT_DOUBLE_EQ(z3.grad_buckets, z2.grad_buckets);
  EXPECT_DOUBLE_EQ(z3.comm_buffers, 1536);
  // Small buckets: the terms follow the bucket, not the stage.
  TrainingSetup sized = s;
  sized.grad_buckets = 0;
  sized.grad_bucket_size = 16;
  sized.zero3_prefetch_buckets = 1;
  const MemoryBreakdown z3s = stage_memory(m, sized, l, c, 1, p1);
  EXPECT_DOUBLE_EQ(z3s.zero3_gather, ((128 / 16 + 1) * 16 + 2 * 16) * 4);
  EXPECT_DOUBLE_EQ(z3s.grad_buckets, 2 * (16 + 16 * 16) * 4 + 2 * 16 * 4);
  EXPECT_EQ(sized.bucket_count(312, 2), 20);
  EXPECT_DOUBLE_EQ(TrainingSetup{}.bucket_elements(1e12, 64), 64e6);  // Megatron: max(40M, 1M x 64)
  EXPECT_DOUBLE_EQ(TrainingSetup{}.bucket_elements(1e12, 8), 40e6);

  // Stage 0 of 1F1B holds pp = 2 micro-batches of its dense layer (2496 bytes each); GPipe all 4.
  // The runtime adds each in-flight micro-batch's chunk output and the residual gradient (256 each);
  // a device that runs a Megatron-style stack (fused attention) is not charged with them.
  l.zero_stage = 0;
  const StageParams p0 = stage_params(m, l, 0);
  EXPECT_DOUBLE_EQ(stage_memory(m, s, l, c, 0, p0).activations, 2 * 2496 + 3 * 256);
  ClusterSpec stack = c;
  stack.device.fused_attention = true;  // no probabilities: 2496 - 128 + b*1*S*4 = 2400
  EXPECT_DOUBLE_EQ(stage_memory(m, s, l, stack, 0, p0).activations, 2 * 2400);
  l.schedule = PipelineSchedule::kGPipe;
  EXPECT_DOUBLE_EQ(stage_memory(m, s, l, c, 0, p0).activations, 4 * 2496 + 5 * 256);
  EXPECT_DOUBLE_EQ(stage_memory(m, s, l, c, 1, p1).activations, 4 * (4672 + 1056) + 256);
  // Full recompute: per micro-batch the layer input and the chunk output, plus the residual gradient.
  l.recompute = RecomputeGranularity::kFull;
  EXPECT_DOUBLE_EQ(stage_memory(m, s, l, c, 0, p0).activations, 4 * (256 + 256) + 256);
  EXPECT_DOUBLE_EQ(stage_memory(m, s, l, stack, 0, p0).activations, 4 * 256);
  l.recompute = RecomputeGranularity::kNone;

  // Mixed precision adds the 16-bit copy; the reserve is a fraction of the device.
  TrainingSetup bf16 = s;
  bf16.precision = Precision::kBF16;
  c.memory_reserve_fraction = 0.25;
  const MemoryBreakdown mixed = stage_memory(m, bf16, l, c, 1, p1);
  EXPECT_DOUBLE_EQ(mixed.weights16, 2 * 696);
  EXPECT_DOUBLE_EQ(mixed.reserve, 0.25 * 1e12);
}

// ---- schedules -----------------------------------------------------------------------------------

TEST(Schedule, BubbleMatchesTheArticlesRule) {
  // (PP - 1) / (PP + micro_batch_num - 1): PP2 with 4 micro-batches ~ 1/5; PP8 with 4 > 1/2.
  EXPECT_DOUBLE_EQ(bubble_fraction(2, 4, 1), 1.0 / 5.0);
  EXPECT_DOUBLE_EQ(bubble_fraction(8, 4, 1), 7.0 / 11.0);
  EXPECT_GT(bubble_fraction(8, 4, 1), 0.5);
  EXPECT_DOUBLE_EQ(bubble_fraction(4, 8, 2), 1.5 / 9.5);  // interleaving divides the idle part by v
}

TEST(Schedule, MicroBatchesInFlight) {
  EXPECT_EQ(in_flight_micro_batches(PipelineSchedule::kGPipe, 4, 8, 1, 0), 8);
  EXPECT_EQ(in_flight_micro_batches(PipelineSchedule::k1F1B, 4, 8, 1, 0), 4);
  EXPECT_EQ(in_flight_micro_batches(PipelineSchedule::k1F1B, 4, 8, 1, 3), 1);
  EXPECT_EQ(in_flight_micro_batches(PipelineSchedule::k1F1B, 4, 2, 1, 0), 2);
  // Megatron interleaved, first stage: p (1 + (p-1)/(p v)) = 4 * (1 + 3/8) = 5.5.
  EXPECT_DOUBLE_EQ(in_flight_micro_batches(PipelineSchedule::kInterleaved, 4, 8, 2, 0), 5.5);
  // Last stage: (v-1) p + 1 = 5 chunk-micro-batches = 2.5 stages' worth.
  EXPECT_DOUBLE_EQ(in_flight_micro_batches(PipelineSchedule::kInterleaved, 4, 8, 2, 3), 2.5);
}

TEST(Schedule, PipelineTimeUsesTheSlowestStage) {
  const double t[] = {1, 2, 1, 1};
  const PipelineTime one = pipeline_time(PipelineSchedule::k1F1B, 4, 1, t, 4);
  EXPECT_DOUBLE_EQ(one.total, 4 * 2 + 3);
  EXPECT_DOUBLE_EQ(one.bubble, 3);
  EXPECT_EQ(one.critical_stage, 1);
  const PipelineTime inter = pipeline_time(PipelineSchedule::kInterleaved, 4, 2, t, 4);
  EXPECT_DOUBLE_EQ(inter.total, 8 + 1.5);
  const double equal[] = {1, 1, 1, 1};
  const PipelineTime uniform = pipeline_time(PipelineSchedule::k1F1B, 4, 1, equal, 4);
  EXPECT_DOUBLE_EQ(uniform.bubble / uniform.total, bubble_fraction(4, 4, 1));
}

// ---- communication ---------------------------------------------------------------------------------

TEST(Comm, AlphaBetaPerCollective) {
  // 8 ranks, 1 GB at 100 GB/s, 5 us: 2*7*5us + 2*7/8 * 1e9/1e11.
  EXPECT_NEAR(ring_all_reduce_seconds(8, 1e9, 5e-6, 100e9), 70e-6 + 0.0175, 1e-15);
  EXPECT_NEAR(ring_gather_seconds(4, 4e9, 1e-6, 1e9), 3e-6 + 3.0, 1e-12);
  EXPECT_NEAR(all_to_all_seconds(4, 4e9, 1e-6, 2e9), 3e-6 + 1.5, 1e-12);
  EXPECT_NEAR(send_recv_seconds(1e9, 1e-5, 1e10), 1e-5 + 0.1, 1e-15);
  EXPECT_EQ(ring_all_reduce_seconds(1, 1e9, 1, 1), 0);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kAllToAll, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kSendRecv, 2), 1);
}

ClusterSpec mesh_cluster() {
  ClusterSpec c = flat_cluster(2, 8);
  c.intra = {LinkKind::kFullMesh, 28e9, 2e-6};
  c.inter = {25e9, 2e-5};
  return c;
}

TEST(Comm, FullMeshBandwidthGrowsWithTheGroup) {
  const ClusterSpec mesh = mesh_cluster();
  EXPECT_DOUBLE_EQ(intra_node_bandwidth(mesh, 8), 7 * 28e9);  // the articles' ~200 GB/s
  EXPECT_DOUBLE_EQ(intra_node_bandwidth(mesh, 2), 28e9);
  const ClusterSpec sw = flat_cluster(1, 8);
  EXPECT_DOUBLE_EQ(intra_node_bandwidth(sw, 2), 1e10);
  EXPECT_DOUBLE_EQ(intra_node_bandwidth(sw, 8), 1e10);
  // TP4 inside a node: 2*3*2us + 1.5 * 1e9 / 84e9.
  EXPECT_NEAR(collective_seconds(mesh, Collective::kAllReduce, GroupSpan{4, 1, 4}, 1e9), 12e-6 + 1.5e9 / 84e9, 1e-15);
}

TEST(Comm, GroupsAcrossNodesUseTheNicsAndTheHierarchy) {
  const ClusterSpec mesh = mesh_cluster();
  const GroupSpan two_nodes{16, 2, 8};
  // Flat ring: 2*15*20us + 2*15/16 * 1e9/25e9 = 0.0756; hierarchical: RS in node (14us + 7/8 * 1e9/196e9)
  // + AR of 1e9/8 over 2 nodes (40us + 0.005) + AG in node: 0.01400 -> the hierarchy wins.
  const double inside = 14e-6 + 0.875e9 / 196e9;
  EXPECT_NEAR(collective_seconds(mesh, Collective::kAllReduce, two_nodes, 1e9), 2 * inside + 4e-5 + 0.005, 1e-12);
  // All-to-all: 7/16 of the buffer inside the node, 8/16 over the NIC, at the same time.
  EXPECT_NEAR(collective_seconds(mesh, Collective::kAllToAll, two_nodes, 1.6e9), 15 * 2e-5 + 0.8e9 / 25e9, 1e-12);
  // One rank per node: a flat ring over the NICs.
  EXPECT_NEAR(collective_seconds(mesh, Collective::kAllReduce, GroupSpan{2, 2, 1}, 1e9),
              ring_all_reduce_seconds(2, 1e9, 2e-5, 25e9), 1e-15);
  EXPECT_NEAR(collective_seconds(mesh, Collective::kSendRecv, GroupSpan{2, 2, 1}, 1e9), 2e-5 + 0.04, 1e-15);
}

TEST(Comm, MeasuredTablesReplaceTheLinkModel) {
  ClusterSpec c = flat_cluster(1, 8);
  c.measured[0][static_cast<int>(Collective::kAllReduce)] = {{2, 1e-5, 1e9}, {4, 3e-5, 2e9}};
  // n = 3: latency and bus bandwidth halfway, bus factor 4/3.
  EXPECT_NEAR(collective_seconds(c, Collective::kAllReduce, GroupSpan{3, 1, 3}, 1e9), 2e-5 + (4.0 / 3.0) / 1.5, 1e-12);
  // n = 8: clamped to the n = 4 sample, bus factor 7/4.
  EXPECT_NEAR(collective_seconds(c, Collective::kAllReduce, GroupSpan{8, 1, 8}, 1e9), 3e-5 + 1.75 * 0.5, 1e-12);
  // Collectives without a table keep the link model.
  EXPECT_NEAR(collective_seconds(c, Collective::kAllGather, GroupSpan{2, 1, 2}, 1e9), 1e-6 + 0.05, 1e-15);
}

// ---- compute -----------------------------------------------------------------------------------------

TEST(Compute, GemmTimeFromPeakAndEfficiency) {
  ClusterSpec c = flat_cluster(1, 1);
  c.device.memory_bandwidth = 1e15;  // compute-bound
  EXPECT_DOUBLE_EQ(gemm_seconds(c, Precision::kFP32, 100, 100, 100), 2e6 / 5e11);
  EXPECT_DOUBLE_EQ(gemm_seconds(c, Precision::kFP32, 100, 100, 100, 3), 3 * 2e6 / 5e11);
  EXPECT_EQ(gemm_seconds(c, Precision::kFP32, 0, 100, 100), 0);
}

TEST(Compute, EfficiencyCurveInterpolatesInLogSize) {
  ClusterSpec c = flat_cluster(1, 1);
  c.device.gemm_efficiency[0] = {{100, 0.2}, {10000, 0.6}};
  EXPECT_DOUBLE_EQ(c.gemm_efficiency(1000, Precision::kFP32), 0.4);  // halfway in log10
  EXPECT_DOUBLE_EQ(c.gemm_efficiency(10, Precision::kFP32), 0.2);    // clamped
  EXPECT_DOUBLE_EQ(c.gemm_efficiency(1e6, Precision::kFP32), 0.6);
  c.device.gemm_efficiency[1].clear();  // no curve: the generic one
  EXPECT_DOUBLE_EQ(c.gemm_efficiency(1e9, Precision::kBF16), default_gemm_efficiency().back().efficiency);
}

TEST(Compute, LayerFlopsByHand) {
  const ModelConfig m = tiny_moe();
  const TrainingSetup s = tiny_setup();
  ClusterSpec c = flat_cluster(1, 4);
  c.device.memory_bandwidth = 1e15;  // GEMMs compute-bound (roofline off)
  const Layout l = make_layout(1, 2, 2, 1, 2, 1);  // T 8, tp 2, ep 2
  // qkv 2*8*12*8 = 1536, QK^T and PV 2 * (2 heads-batches * 2*4*4*4) = 512, W_o 2*8*8*4 = 512;
  // dense FFN: W1, W3 2 * 2*8*8*8 = 2048, W2 1024.
  const LayerCompute dense = layer_compute(m, s, l, c, false);
  EXPECT_DOUBLE_EQ(dense.forward.flops, 1536 + 512 + 512 + 2048 + 1024);
  EXPECT_DOUBLE_EQ(dense.forward.gemm_time, dense.forward.flops / 5e11);
  // Element-wise: twice the layer's activations at the bandwidth.
  EXPECT_DOUBLE_EQ(dense.forward.elementwise_time, 2 * 2496 / 1e15);
  // MoE: router 2*8*4*8 = 512; 2 local experts with 8 rows each: W1, W3 4 * 1024, W2 2 * 1024.
  const LayerCompute moe = layer_compute(m, s, l, c, true);
  EXPECT_DOUBLE_EQ(moe.forward.flops, 2560 + 512 + 4096 + 2048);
  EXPECT_DOUBLE_EQ(moe.expert_time, 6144 / 5e11);
  // The whole model, one sequence of 4: attention 2560 per layer, dense FFN 3072, router 256 +
  // top-2 experts 6144, head 2*4*8*32 = 2048.
  EXPECT_DOUBLE_EQ(model_forward_flops_per_sequence(m, 4), 2 * 2560 + 3072 + 256 + 6144 + 2048);
}

TEST(Compute, ModelOptionFlopsByHand) {
  const ModelConfig m = tiny_options();
  const Layout l = make_layout(1, 2, 2, 1, 2, 1);  // T 8, tp 2, ep 2
  // qkv 2*8*(16/2)*8 = 1024, QK^T and PV 512, W_o 512, router 512; 2 local experts of 8 rows:
  // W1, W3 4 x 2*8*4*8 = 2048, W2 2 x 2*8*8*4 = 1024; shared on all 8 tokens: W1, W3 2 x 2*8*2*8
  // = 512, W2 2*8*8*2 = 256.
  ClusterSpec c = flat_cluster(1, 4);
  c.device.memory_bandwidth = 1e15;  // GEMMs compute-bound (roofline off)
  const LayerCompute moe = layer_compute(m, tiny_setup(), l, c, true);
  EXPECT_DOUBLE_EQ(moe.forward.flops, 1024 + 512 + 512 + 512 + 3072 + 768);
  EXPECT_DOUBLE_EQ(moe.expert_time, 3072 / 5e11);
  // One sequence of 4: attention 2*4*8*16 + 512 + 512 per layer, dense FFN 3072, router 256, top-2
  // experts 3072, shared 768, head 2048.
  EXPECT_DOUBLE_EQ(model_forward_flops_per_sequence(m, 4), 2 * 2048 + 3072 + 256 + 3072 + 768 + 2048);
}

// ---- step time composition -------------------------------------------------------------------------

TEST(Step, SingleDeviceIsComputePlusOptimizer) {
  PlanContext ctx{"tiny", tiny_moe(), tiny_setup(8), flat_cluster(1, 1)};
  const Layout l = make_layout(1, 1, 1, 1, 2, 4);
  ASSERT_EQ(layout_problem(ctx, l), "");
  LayoutEvaluator evaluator(ctx);
  const Evaluation e = evaluator.evaluate(l);
  const LayerCompute dense = layer_compute(ctx.model, ctx.setup, l, ctx.cluster, false);
  const LayerCompute moe = layer_compute(ctx.model, ctx.setup, l, ctx.cluster, true);
  const PassCompute head = head_compute(ctx.model, ctx.setup, l, ctx.cluster);
  const double embed = 2 * 8 * 8 * 4 / 1e10;
  const double forward = dense.forward.time() + moe.forward.time() + head.time() + embed;
  // Gradient norm 4 + AdamW 28 + zeroing the gradients 4 bytes per parameter, fp32.
  const double optimizer = 3016 * 36 / 1e10;
  EXPECT_NEAR(e.time.compute, 4 * 3 * forward, 1e-18);
  EXPECT_DOUBLE_EQ(e.time.communication(), 0);
  EXPECT_DOUBLE_EQ(e.time.bubble, 0);
  EXPECT_NEAR(e.time.optimizer, optimizer, 1e-18);
  EXPECT_NEAR(e.time.step, 4 * 3 * forward + optimizer, 1e-15);
  EXPECT_NEAR(e.tokens_per_second, 8 * 4 / e.time.step, 1e-6);
  EXPECT_NEAR(e.mfu, 3 * 16640.0 * 8 / (e.time.step * 1e12), 1e-12);
}

// The per-stage breakdown (issue 25: compare with a profiler) adds up to the step's own parts on every
// layout family: the critical stage's GEMM classes + memory-bound work are its compute, its exposed
// collectives and recompute are the step's, busy + idle is the pipeline part, and the GEMM classes are
// the layer's GEMM time.
TEST(Step, StageBreakdownAddsUpToTheStep) {
  const ModelPreset preset = model_preset("moe-120b");
  ClusterSpec cluster = flat_cluster(8, 8, 1e15);
  cluster.device.kernel_overhead = 4e-6;
  cluster.device.speed_variation = 0.01;
  PlanContext ctx{"moe-120b", preset.model, preset.setup, cluster};
  const LayerCompute moe_layer = layer_compute(ctx.model, ctx.setup, make_layout(8, 8, 1, 1, 1, 4), cluster, true);
  EXPECT_NEAR(moe_layer.gemms.sum(), moe_layer.forward.gemm_time, 1e-12 * moe_layer.forward.gemm_time);
  for (const bool fused : {false, true})
  for (const std::string& text : {std::string("dp=8,ep=8,tp=1,pp=1,mb=4"),
                                  std::string("dp=2,ep=8,tp=4,pp=1,mb=16,recompute=full,zero=3"),
                                  std::string("dp=2,ep=8,pp=4,mb=16,recompute=selective,zero=2,schedule=interleaved,v=2"),
                                  std::string("dp=1,ep=8,tp=2,pp=4,mb=32,zero=1,sp=1")}) {
    SCOPED_TRACE(text + (fused ? " fused attention" : ""));
    ctx.cluster.device.fused_attention = fused;
    const Layout l = parse_layout(text, ctx.setup.global_batch, 64);
    LayoutEvaluator evaluator(ctx);
    const Evaluation e = evaluator.evaluate(l);
    const std::vector<StageTime> stages = evaluator.stage_times(l);
    ASSERT_EQ(static_cast<int>(stages.size()), l.pp);
    const StageTime& crit = stages[e.time.critical_stage];
    const double tol = 1e-9 * e.time.step;
    EXPECT_NEAR(crit.gemms.sum() + crit.head_gemm + crit.memory_bound + crit.kernel_overhead, e.time.compute, tol);
    EXPECT_NEAR(crit.recompute, e.time.recompute, tol);
    EXPECT_NEAR(crit.tp_exposed, e.time.tp_comm, tol);
    EXPECT_NEAR(crit.ep_exposed, e.time.ep_comm, tol);
    EXPECT_NEAR(crit.ep_exposed + crit.ep_hidden, e.time.ep_comm_total, tol);
    EXPECT_NEAR(crit.pp_exposed, e.time.pp_comm, tol);
    EXPECT_NEAR(crit.idle, e.time.bubble, tol);
    double dp = 0, gather = 0, optimizer = 0;
    for (const StageTime& s : stages) {
      EXPECT_NEAR(s.busy + s.idle, crit.busy + crit.idle, tol) << "stage " << s.stage;
      EXPECT_GE(s.memory_bound, 0);
      EXPECT_GE(s.ep_hidden, 0);
      EXPECT_GE(s.zero_hidden, 0);
      EXPECT_EQ(s.head, s.stage == l.pp - 1);
      EXPECT_EQ(s.embedding, s.stage == 0);
      EXPECT_EQ(s.head_gemm > 0, s.head);
      dp = std::max(dp, s.dp_exposed);
      gather = std::max(gather, s.param_gather);
      optimizer = std::max(optimizer, s.optimizer);
    }
    EXPECT_GT(crit.step_sync, 0);  // the gradient-norm and loss all-reduces over 64 ranks
    EXPECT_GT(crit.kernel_overhead, 0);
    EXPECT_NEAR(crit.kernel_overhead, e.time.kernel_overhead, tol);
    EXPECT_GT(crit.straggler, 0);
    EXPECT_NEAR(crit.straggler, e.time.straggler, tol);
    EXPECT_NEAR(crit.busy + crit.idle + crit.straggler + dp + gather + crit.step_sync + optimizer, e.time.step, tol);
  }
  // A chunked all-to-all hides part of itself behind the expert GEMMs.
  ctx.model.moe.a2a_chunks = 4;
  LayoutEvaluator evaluator(ctx);
  const StageTime chunked = evaluator.stage_times(parse_layout("dp=2,ep=8,tp=4,pp=1,mb=16", ctx.setup.global_batch, 64))[0];
  EXPECT_GT(chunked.ep_hidden, 0);
  EXPECT_GT(chunked.ep_exposed, 0);
}

TEST(Step, DataParallelReductionWithoutOverlapIsFullyExposed) {
  PlanContext ctx{"tiny", tiny_moe(), tiny_setup(8), flat_cluster(1, 2)};
  ctx.setup.overlap_grad_reduce = false;
  const Layout l = make_layout(2, 1, 1, 1, 2, 2);
  LayoutEvaluator evaluator(ctx);
  const Evaluation e = evaluator.evaluate(l);
  // fp32 gradients of all 3016 parameters all-reduced over the two data replicas (dense and experts
  // are both replicated over dp here): two rings of 2 ranks on the switch.
  const GroupSpan pair{2, 1, 2};
  const double expected = collective_seconds(ctx.cluster, Collective::kAllReduce, pair, 1480 * 4) +
                          collective_seconds(ctx.cluster, Collective::kAllReduce, pair, 1536 * 4);
  EXPECT_NEAR(e.time.dp_comm, expected, 1e-18);
  // With overlap only the last of the 4 buckets waits (the backward is far longer than the rest).
  ctx.setup.overlap_grad_reduce = true;
  LayoutEvaluator overlapped(ctx);
  EXPECT_LT(overlapped.evaluate(l).time.dp_comm, expected);
  EXPECT_NEAR(overlapped.evaluate(l).time.dp_comm,
              expected / 4 + std::max(0.0, expected * 3 / 4 - overlapped.evaluate(l).time.compute / 2 * 2 / 3), 1e-15);
}

// The recompute advice is checked against the memory model before it is printed: it names the
// lighter setting that fits, or says that none does.
TEST(Bottleneck, RecomputeAdviceNamesOnlyWhatFits) {
  PlanContext ctx{"tiny", tiny_moe(), tiny_setup(8), flat_cluster(1, 1)};
  Layout l = make_layout(1, 1, 1, 1, 2, 4);
  auto bytes = [&](RecomputeGranularity r) {
    Layout c = l;
    c.recompute = r;
    return LayoutEvaluator(ctx).memory(c).total();
  };
  const double none = bytes(RecomputeGranularity::kNone), selective = bytes(RecomputeGranularity::kSelective);
  const double full = bytes(RecomputeGranularity::kFull);
  ASSERT_LT(full, selective);
  ASSERT_LT(selective, none);
  l.recompute = RecomputeGranularity::kFull;
  auto advice = [&](double limit) {
    ctx.cluster.device.memory_bytes = limit;
    LayoutEvaluator evaluator(ctx);
    const Evaluation e = evaluator.evaluate(l);
    EXPECT_TRUE(e.fits);
    EXPECT_GE(e.time.recompute / e.time.step, 0.15);
    return describe_bottleneck(ctx, e);
  };
  std::string why = advice(2 * none);
  EXPECT_EQ(why.rfind("recompute is ", 0), 0u) << why;
  EXPECT_NE(why.find("recompute none fits"), std::string::npos) << why;
  why = advice((selective + none) / 2);
  EXPECT_NE(why.find("recompute selective fits"), std::string::npos) << why;
  why = advice((full + selective) / 2);
  EXPECT_NE(why.find("lighter recompute does not fit (recompute selective needs"), std::string::npos) << why;
}

}  // namespace
}  // namespace moe4d

namespace moe4d {
namespace {

// Group-limited routing's reach, by hand: DeepSeek-V3 (256 experts in 8 groups, top-8 from 4 groups)
// with EP over 8 nodes, one group per node: a token reaches at most 4 nodes; the 4 groups are 4
// distinct nodes, the own node among them with probability 4/8, so 4 - 0.5 = 3.5 remote nodes,
// against 7 (1 - (7/8)^8) = 4.595 for 8 unrestricted picks.
TEST(CommModel, GroupLimitedRoutingBoundsTheNodesATokenReaches) {
  const RoutedNodes ds = routed_nodes_per_token(8, 8, 4, 8);
  EXPECT_EQ(ds.most, 4);
  EXPECT_NEAR(ds.remote, 3.5, 1e-12);
  const RoutedNodes free = routed_nodes_per_token(8, 1, 1, 8);
  EXPECT_EQ(free.most, 8);
  EXPECT_NEAR(free.remote, 7 * (1 - std::pow(7.0 / 8, 8)), 1e-12);
  // Two groups per node (16 groups on 8 nodes), 4 of them: P(a node holds none) = C(14,4)/C(16,4)
  // = 1001/1820, so 8 (1 - 1001/1820) distinct nodes, 7/8 of them remote.
  EXPECT_NEAR(routed_nodes_per_token(8, 16, 4, 8).remote, 8 * (1 - 1001.0 / 1820) * 7 / 8, 1e-12);
  // A group over two nodes (4 groups on 8 nodes), 2 of them: the 8 picks over 4 nodes.
  const RoutedNodes wide = routed_nodes_per_token(8, 4, 2, 8);
  EXPECT_EQ(wide.most, 4);
  EXPECT_NEAR(wide.remote, 4 * (1 - std::pow(0.75, 8)) * 7 / 8, 1e-12);
  // One node: nothing leaves it.
  EXPECT_EQ(routed_nodes_per_token(8, 8, 4, 1).remote, 0);
}

// The node-aware dispatch's expectation against enumerating every set of k distinct experts (the
// source on node 0; by symmetry any node), experts spread evenly over the nodes.
TEST(CommModel, ExpectedRemoteNodesMatchesEnumeration) {
  struct Case {
    int experts, k, nodes;
  };
  for (const Case c : {Case{8, 3, 4}, Case{16, 2, 2}, Case{16, 8, 2}, Case{12, 4, 3}, Case{16, 5, 8}}) {
    double sum = 0, sets = 0;
    const int per_node = c.experts / c.nodes;
    for (uint32_t mask = 0; mask < (1u << c.experts); ++mask) {
      if (__builtin_popcount(mask) != c.k) continue;
      int remote = 0;
      for (int n = 1; n < c.nodes; ++n) remote += ((mask >> (n * per_node)) & ((1u << per_node) - 1)) != 0;
      sum += remote;
      sets += 1;
    }
    EXPECT_NEAR(expected_remote_nodes(c.experts, c.k, c.nodes), sum / sets, 1e-12)
        << c.experts << " experts, top-" << c.k << ", " << c.nodes << " nodes";
  }
  EXPECT_EQ(expected_remote_nodes(64, 8, 1), 0);
  EXPECT_NEAR(expected_remote_nodes(16, 8, 2), 1 - 1.0 / 12870, 1e-12);  // C(8,8) / C(16,8)
  EXPECT_EQ(hierarchical_pair_bytes(64, 8, 4), 4 * 64 * 4 + 3 * 8 * 4);
}

}  // namespace
}  // namespace moe4d
