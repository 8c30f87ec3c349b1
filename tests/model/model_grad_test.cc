// The whole reference model on one rank: its gradient against central finite differences (with
// MoE routing, capacity dropping, aux and z losses), recompute modes giving identical gradients, and
// overfitting one batch.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/rng.h"
#include "model/param_store.h"
#include "model/transformer.h"
#include "train/optimizer.h"

namespace moe4d {
namespace {

ModelConfig tiny_config() {
  ModelConfig m;
  m.vocab_size = 32;
  m.hidden_size = 16;
  m.num_layers = 2;
  m.num_heads = 2;
  m.ffn_hidden_size = 24;
  m.seq_length = 8;
  m.moe.num_experts = 4;
  m.moe.top_k = 2;
  m.moe.layer_freq = 2;  // layer 0 dense, layer 1 MoE
  m.moe.aux_loss_coeff = 0.05;
  m.moe.z_loss_coeff = 0.01;
  return m;
}

// A one-rank model with a fixed batch: loss() runs forward (and optionally backward).
struct TinyModel {
  explicit TinyModel(ModelConfig config, int batch = 2, RecomputeGranularity recompute = RecomputeGranularity::kNone)
      : model(std::move(config)), pc(make_single_rank_context()), batch(batch), recompute(recompute) {
    net = std::make_unique<Transformer>(
        model, *pc, std::vector<ChunkSpec>{{0, model.num_layers, true, true}}, params);
    params.finalize();
    params.init_values(7);
    for (MoeBlock* b : net->moe_blocks())
      stats.push_back({.layer = b->layer(), .tokens_per_expert = std::vector<double>(model.moe.num_experts)});
    CounterRng rng(11);
    for (int i = 0; i < batch * model.seq_length; ++i) {
      tokens.push_back(int(rng.next_u64() % model.vocab_size));
      targets.push_back(int(rng.next_u64() % model.vocab_size));
    }
  }

  // The training objective of one micro-batch: mean CE + aux_coeff * aux + z_coeff * z.
  double loss(bool backward) {
    for (auto& s : stats) s = {.layer = s.layer, .tokens_per_expert = std::vector<double>(model.moe.num_experts)};
    BlockContext ctx{*pc, params, model, net->rope(), state.arena, scratch, batch, model.seq_length, 1.0f, recompute,
                     &stats};
    HeadOutput head;
    net->forward(0, tokens.data(), targets.data(), nullptr, state, ctx, &head);
    double total = head.loss_sum / head.tokens;
    for (const auto& s : stats) total += model.moe.aux_loss_coeff * s.aux_loss + model.moe.z_loss_coeff * s.z_loss;
    if (backward) {
      net->backward(0, nullptr, nullptr, state, ctx, {});
    } else {
      state.arena.reset();
    }
    return total;
  }

  ModelConfig model;
  std::unique_ptr<ParallelContext> pc;
  ParamStore params;
  std::unique_ptr<Transformer> net;
  MicroBatchState state;
  Arena scratch;
  std::vector<MoeLayerStats> stats;
  std::vector<int> tokens, targets;
  int batch;
  RecomputeGranularity recompute;
};

// Compares d loss / d p for a sample of entries of every parameter with central differences. The
// loss is only piecewise smooth (top-k routing and capacity dropping switch discretely), so an entry
// whose differences at step eps and eps/2 disagree has a switch within reach and is skipped; at
// most a few may be.
void check_gradients(TinyModel& m, double eps, double rel_tol) {
  m.params.zero_grads();
  m.loss(true);
  std::mt19937 gen(3);
  int checked = 0, skipped = 0;
  auto central = [&](float* value, int64_t i, double h) {
    const float saved = value[i];
    value[i] = saved + float(h);
    const double up = m.loss(false);
    value[i] = saved - float(h);
    const double down = m.loss(false);
    value[i] = saved;
    return (up - down) / (2 * h);
  };
  for (int id = 0; id < m.params.size(); ++id) {
    const ParamInfo& info = m.params.info(id);
    float* value = m.params.value(id);
    const float* grad = m.params.grad(id);
    std::uniform_int_distribution<int64_t> pick(0, info.numel() - 1);
    for (int trial = 0; trial < 6; ++trial) {
      const int64_t i = pick(gen);
      const double numeric = central(value, i, eps), finer = central(value, i, eps / 2);
      const double analytic = grad[i];
      const double scale = std::max({std::abs(numeric), std::abs(analytic), 1e-3});
      if (std::abs(numeric - finer) / scale > rel_tol) {
        ++skipped;
        continue;
      }
      // Large entries: Richardson extrapolation of the two steps cancels the O(h^2) truncation error,
      // which on the embedding (entries ~0.02, steps of 1e-2) reaches ~2% in the grouped-query models.
      // Small entries: the plain difference, which the extrapolation's amplified fp32 noise would swamp.
      const double extrapolated = (4 * finer - numeric) / 3;
      const double error = std::min(std::abs(numeric - analytic), std::abs(extrapolated - analytic)) / scale;
      EXPECT_LE(error, rel_tol) << info.name << "[" << i << "]: analytic " << analytic << " vs numeric " << numeric
                                << " (extrapolated " << extrapolated << ")";
      ++checked;
    }
  }
  EXPECT_GT(checked, 50);
  EXPECT_LE(skipped, checked / 10) << "too many entries near a routing switch";
}

// Scales the router weights up so the top-k choice sits far from ties: a finite-difference step
// then never flips a routing decision (the loss is only piecewise smooth in the router weights).
void spread_router(TinyModel& m, float factor) {
  for (int id = 0; id < m.params.size(); ++id)
    if (m.params.info(id).name.find("router") != std::string::npos)
      for (int64_t i = 0; i < m.params.info(id).numel(); ++i) m.params.value(id)[i] *= factor;
}

TEST(ModelGradient, DroplessMoeMatchesFiniteDifferences) {
  TinyModel m(tiny_config());
  spread_router(m, 100.0f);
  check_gradients(m, 1e-2, 2e-2);
}

TEST(ModelGradient, CapacityDroppingMatchesFiniteDifferences) {
  ModelConfig cfg = tiny_config();
  cfg.moe.capacity_factor = 0.75;  // some slots are dropped
  TinyModel m(cfg);
  spread_router(m, 100.0f);
  check_gradients(m, 1e-2, 2e-2);
  double dropped = 0, routed = 0;
  m.loss(false);
  for (const auto& s : m.stats) {
    dropped += s.dropped_slots;
    routed += s.routed_slots;
  }
  EXPECT_GT(dropped, 0) << "the capacity limit should drop some of " << routed << " slots";
}

TEST(ModelGradient, DenseTiedEmbeddingsMatchFiniteDifferences) {
  ModelConfig cfg = tiny_config();
  cfg.moe.num_experts = 0;
  cfg.tie_embeddings = true;
  TinyModel m(cfg);
  EXPECT_LT(m.params.find("head.weight"), 0);
  check_gradients(m, 1e-2, 2e-2);
}

// Grouped-query attention (2 query heads per KV head) with a custom RoPE theta and norm epsilon.
TEST(ModelGradient, GroupedQueryAttentionMatchesFiniteDifferences) {
  ModelConfig cfg = tiny_config();
  cfg.num_heads = 4;  // head_dim 4
  cfg.num_kv_heads = 2;
  cfg.rope_theta = 1e6;
  cfg.norm_eps = 1e-6;
  TinyModel m(cfg);
  EXPECT_EQ(m.params.info(m.params.find("layers.0.attn.qkv.weight")).global_shape, Shape({16, (4 + 2 * 2) * 4}));
  spread_router(m, 100.0f);
  check_gradients(m, 1e-2, 2e-2);
}

TEST(ModelGradient, MultiQueryAttentionMatchesFiniteDifferences) {
  ModelConfig cfg = tiny_config();
  cfg.num_heads = 4;
  cfg.num_kv_heads = 1;
  TinyModel m(cfg);
  EXPECT_EQ(m.params.info(m.params.find("layers.1.attn.qkv.weight")).global_shape, Shape({16, (4 + 2) * 4}));
  spread_router(m, 100.0f);
  check_gradients(m, 1e-2, 2e-2);
}

// Qwen3-style attention: per-head q/k RMSNorm before RoPE, an explicit head_dim with num_heads x
// head_dim (24) != hidden_size (16), grouped-query attention; layer 1 kept dense by moe.dense_layers.
TEST(ModelGradient, QkNormAndExplicitHeadDimMatchFiniteDifferences) {
  ModelConfig cfg = tiny_config();
  cfg.num_layers = 3;
  cfg.num_heads = 4;
  cfg.num_kv_heads = 2;
  cfg.head_size = 6;
  cfg.qk_norm = true;
  cfg.moe.layer_freq = 1;
  cfg.moe.dense_layers = {1};
  TinyModel m(cfg);
  EXPECT_EQ(m.params.info(m.params.find("layers.0.attn.qkv.weight")).global_shape, Shape({16, (4 + 2 * 2) * 6}));
  EXPECT_EQ(m.params.info(m.params.find("layers.0.attn.out.weight")).global_shape, Shape({24, 16}));
  EXPECT_EQ(m.params.info(m.params.find("layers.2.attn.k_norm.weight")).global_shape, Shape({6}));
  EXPECT_LT(m.params.find("layers.1.moe.router.weight"), 0) << "layer 1 is listed in dense_layers";
  EXPECT_GE(m.params.find("layers.2.moe.router.weight"), 0);
  // Norm weights away from their initial ones, so that a gradient that ignores them would show.
  for (int id = 0; id < m.params.size(); ++id)
    if (m.params.info(id).name.find("_norm.weight") != std::string::npos)
      for (int64_t i = 0; i < m.params.info(id).numel(); ++i) m.params.value(id)[i] = 0.5f + 0.1f * float(i % 7);
  spread_router(m, 100.0f);
  check_gradients(m, 1e-2, 2e-2);
}

// Narrow routed experts, two shared experts of their own width, the first layer dense.
TEST(ModelGradient, SharedAndNarrowExpertsMatchFiniteDifferences) {
  ModelConfig cfg = tiny_config();
  cfg.moe.layer_freq = 1;
  cfg.moe.first_dense_layers = 1;
  cfg.moe.expert_ffn_hidden_size = 8;
  cfg.moe.shared_experts = 2;
  cfg.moe.shared_expert_ffn_hidden_size = 6;
  TinyModel m(cfg);
  EXPECT_LT(m.params.find("layers.0.moe.router.weight"), 0) << "layer 0 is one of the first dense layers";
  EXPECT_EQ(m.params.info(m.params.find("layers.1.moe.experts.w1")).global_shape, Shape({4, 16, 8}));
  EXPECT_EQ(m.params.info(m.params.find("layers.1.moe.shared.w1.weight")).global_shape, Shape({16, 12}));
  EXPECT_EQ(m.params.info(m.params.find("layers.1.moe.shared.w2.weight")).global_shape, Shape({12, 16}));
  spread_router(m, 100.0f);
  check_gradients(m, 1e-2, 2e-2);
}

// Sigmoid router scores (DeepSeek-V3), with and without renormalising the picked weights, with the
// aux and z losses on.
TEST(ModelGradient, SigmoidRoutingMatchesFiniteDifferences) {
  for (bool normalize : {true, false}) {
    SCOPED_TRACE(normalize ? "normalize_top_k" : "raw sigmoid weights");
    ModelConfig cfg = tiny_config();
    cfg.moe.score_function = RouterScore::kSigmoid;
    cfg.moe.normalize_top_k = normalize;
    TinyModel m(cfg);
    spread_router(m, 100.0f);
    check_gradients(m, 1e-2, 2e-2);
  }
}

// DeepSeek-V3 routing: sigmoid scores in 3 groups of 2 experts, top-3 from the best 2 groups, weights
// scaled by 2.5, with each balance statistic (per micro-batch, per sequence, global: one rank's global
// batch is its micro-batches so far).
TEST(ModelGradient, GroupLimitedRoutingAndBalanceLossesMatchFiniteDifferences) {
  for (LoadBalancing balancing : {LoadBalancing::kAuxLoss, LoadBalancing::kSeqAuxLoss, LoadBalancing::kGlobalAuxLoss}) {
    SCOPED_TRACE(static_cast<int>(balancing));
    ModelConfig cfg = tiny_config();
    cfg.moe.num_experts = 6;
    cfg.moe.top_k = 3;
    cfg.moe.num_groups = 3;
    cfg.moe.group_topk = 2;
    cfg.moe.routed_scaling_factor = 2.5;
    cfg.moe.score_function = RouterScore::kSigmoid;
    cfg.moe.aux_loss_coeff = 0.5;  // large enough that a wrong balance gradient shows
    cfg.moe.load_balancing_type = balancing;
    TinyModel m(cfg);
    // Spread by 10 only: at 100 the sigmoid scores saturate, group sums tie, and ~10% of the
    // sampled entries sit at a group switch (a flaky skip count across CPUs); at 10 it is 2-3%.
    spread_router(m, 10.0f);
    check_gradients(m, 1e-2, 2e-2);
  }
}

TEST(ModelGradient, SoftmaxWithoutRenormalisingMatchesFiniteDifferences) {
  ModelConfig cfg = tiny_config();
  cfg.moe.normalize_top_k = false;
  TinyModel m(cfg);
  spread_router(m, 100.0f);
  check_gradients(m, 1e-2, 2e-2);
}

// Multi-head latent attention (model/mla_block.h): 2 heads, qk 4 + 4 and v 6 (the attention core's
// heads zero-padded to 8), YaRN with mscale_all_dim (the softmax scale's correction); with a query
// compression (q_lora_rank) and with a plain query projection.
ModelConfig mla_config(int q_lora_rank) {
  ModelConfig cfg = tiny_config();
  cfg.mla = {.q_lora_rank = q_lora_rank, .kv_lora_rank = 8, .qk_nope_head_dim = 4, .qk_rope_head_dim = 4,
             .v_head_dim = 6};
  cfg.rope_scaling = {.factor = 4, .original_max_position_embeddings = 4, .mscale = 1, .mscale_all_dim = 1};
  return cfg;
}

TEST(ModelGradient, MultiHeadLatentAttentionMatchesFiniteDifferences) {
  for (int q_lora_rank : {6, 0}) {
    SCOPED_TRACE(q_lora_rank ? "q_lora_rank 6" : "plain query projection");
    TinyModel m(mla_config(q_lora_rank));
    EXPECT_LT(m.params.find("layers.0.attn.qkv.weight"), 0);
    EXPECT_EQ(m.params.info(m.params.find("layers.0.attn.kv_a.weight")).global_shape, Shape({16, 8 + 4}));
    EXPECT_EQ(m.params.info(m.params.find("layers.0.attn.kv_b.weight")).global_shape, Shape({8, 2 * (4 + 6)}));
    EXPECT_EQ(m.params.info(m.params.find("layers.0.attn.out.weight")).global_shape, Shape({2 * 6, 16}));
    if (q_lora_rank) {
      EXPECT_EQ(m.params.info(m.params.find("layers.1.attn.q_b.weight")).global_shape, Shape({6, 2 * 8}));
      // The latent norms start at 1; spread them so that their gradients are checked away from it.
      for (const char* name : {"layers.0.attn.q_a_norm.weight", "layers.1.attn.kv_a_norm.weight"}) {
        const int id = m.params.find(name);
        for (int64_t i = 0; i < m.params.info(id).numel(); ++i) m.params.value(id)[i] = 0.5f + 0.1f * float(i % 7);
      }
    } else {
      EXPECT_EQ(m.params.info(m.params.find("layers.1.attn.q.weight")).global_shape, Shape({16, 2 * 8}));
    }
    spread_router(m, 100.0f);
    check_gradients(m, 1e-2, 2e-2);
  }
}

std::vector<float> gradients_with(RecomputeGranularity mode, const ModelConfig& cfg = tiny_config()) {
  TinyModel m(cfg, 2, mode);
  m.params.zero_grads();
  m.loss(true);
  std::vector<float> out;
  for (ParamGroup g : {ParamGroup::kDense, ParamGroup::kExpert})
    out.insert(out.end(), m.params.flat_grads(g), m.params.flat_grads(g) + m.params.flat_size(g));
  return out;
}

TEST(ModelRecompute, FullAndSelectiveGiveIdenticalGradients) {
  const std::vector<float> none = gradients_with(RecomputeGranularity::kNone);
  EXPECT_EQ(none, gradients_with(RecomputeGranularity::kFull));
  EXPECT_EQ(none, gradients_with(RecomputeGranularity::kSelective));
  ModelConfig options = tiny_config();  // every new model option at once
  options.num_heads = 4;
  options.num_kv_heads = 2;
  options.moe.expert_ffn_hidden_size = 8;
  options.moe.shared_experts = 1;
  options.moe.score_function = RouterScore::kSigmoid;
  options.moe.num_groups = 2;
  options.moe.group_topk = 1;
  options.moe.routed_scaling_factor = 2.5;
  options.moe.load_balancing_type = LoadBalancing::kSeqAuxLoss;
  options.head_size = 6;  // Qwen3-style attention: 4 x 6 != 16, q/k norm
  options.qk_norm = true;
  const std::vector<float> with_options = gradients_with(RecomputeGranularity::kNone, options);
  EXPECT_EQ(with_options, gradients_with(RecomputeGranularity::kFull, options));
  EXPECT_EQ(with_options, gradients_with(RecomputeGranularity::kSelective, options));
  const std::vector<float> mla = gradients_with(RecomputeGranularity::kNone, mla_config(6));
  EXPECT_EQ(mla, gradients_with(RecomputeGranularity::kFull, mla_config(6)));
  EXPECT_EQ(mla, gradients_with(RecomputeGranularity::kSelective, mla_config(6)));
}

TEST(ModelTraining, OverfitsOneBatch) {
  TinyModel m(tiny_config(), 2);
  TrainConfig train;
  train.weight_decay = 0;
  AdamW adam(m.params, train);
  double first = 0, last = 0;
  for (int step = 1; step <= 300; ++step) {
    m.params.zero_grads();
    last = m.loss(true);
    if (step == 1) first = last;
    adam.step(step, 1e-2, 1.0f);
  }
  EXPECT_GT(first, 3.0);  // ~ln(32) at initialisation
  // Adam at a constant 1e-2 settles around 0.05 (the exact value depends on the GEMM kernels the
  // CPU dispatches to): a 35x fall from ln(32) is memorisation.
  EXPECT_LT(last, 0.1) << "loss went from " << first << " to " << last;
}

}  // namespace
}  // namespace moe4d
