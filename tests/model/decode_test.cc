// The KV-cache decoding path (Transformer::decode, AttentionBlock::forward_cached: RoPE at absolute
// positions, the cache writes, attention over the cached keys and values) against the full window
// (Transformer::logits_at) on the same weights: a prompt, then one token at a time, every step's
// logits compared. On the cpu and the reference backend (backend/backend.h), and across them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu_backend.h"
#include "backend/reference_backend.h"
#include "model/kv_cache.h"
#include "model/param_store.h"
#include "model/transformer.h"
#include "parallel/parallel_context.h"

namespace moe4d {
namespace {

ModelConfig decode_model() {
  ModelConfig m;
  m.vocab_size = 64;
  m.hidden_size = 32;
  m.num_layers = 2;
  m.num_heads = 4;
  m.num_kv_heads = 2;  // grouped-query: two query heads per KV head
  m.ffn_hidden_size = 48;
  m.seq_length = 16;
  m.moe.num_experts = 4;
  m.moe.top_k = 2;
  m.moe.layer_freq = 2;  // layer 1 MoE, dropless
  return m;
}

// The logits after each of `tokens`' prefixes of length >= prompt: [steps][vocab].
std::vector<std::vector<float>> logits_of(const ModelConfig& m, Backend& backend, bool cached,
                                          const std::vector<int>& tokens, int prompt) {
  auto pc = make_single_rank_context();
  ParamStore params;
  Transformer model(m, *pc, {ChunkSpec{0, m.num_layers, true, true}}, params);
  params.finalize();
  params.init_values(7);
  MicroBatchState state;
  Arena scratch;
  KvCache cache(m, m.kv_heads());
  std::vector<std::vector<float>> out;
  std::vector<int> window(size_t(m.seq_length), 0);
  for (int length = prompt; length <= int(tokens.size()); ++length) {
    std::vector<float> logits(size_t(m.vocab_size));
    const int n = cached ? (length == prompt ? prompt : 1) : m.seq_length;
    BlockContext ctx{*pc, params, m, model.rope(), state.arena, scratch, 1, n, 1.0f, RecomputeGranularity::kNone,
                     nullptr};
    ctx.numerics.backend = &backend;
    if (cached) {
      model.decode(tokens.data() + length - n, cache, logits.data(), state, ctx);
    } else {
      std::copy(tokens.begin(), tokens.begin() + length, window.begin());
      model.logits_at(window.data(), length - 1, logits.data(), state, ctx);
    }
    out.push_back(std::move(logits));
  }
  return out;
}

void expect_near(const std::vector<std::vector<float>>& got, const std::vector<std::vector<float>>& want,
                 double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t s = 0; s < want.size(); ++s)
    for (size_t v = 0; v < want[s].size(); ++v)
      ASSERT_NEAR(got[s][v], want[s][v], tol * (1.0 + std::abs(want[s][v]))) << what << ", step " << s << ", id " << v;
}

TEST(Decode, CachedLogitsMatchFullWindowOnBothBackends) {
  const ModelConfig m = decode_model();
  std::vector<int> tokens;
  for (int i = 0; i < m.seq_length; ++i) tokens.push_back((i * 37 + 11) % m.vocab_size);
  const int prompt = 5;
  CpuBackend cpu;
  ReferenceBackend reference;
  const auto cpu_full = logits_of(m, cpu, false, tokens, prompt);
  const auto cpu_cached = logits_of(m, cpu, true, tokens, prompt);
  const auto ref_full = logits_of(m, reference, false, tokens, prompt);
  const auto ref_cached = logits_of(m, reference, true, tokens, prompt);
  ASSERT_EQ(cpu_full.size(), size_t(m.seq_length - prompt + 1));
  // fp32 sums in other orders (the window's blocked GEMMs against the cache's per-token loops; fp32
  // against fp64 accumulation): a few ulps of the logits.
  expect_near(cpu_cached, cpu_full, 1e-5, "cpu: cached against full window");
  expect_near(ref_cached, ref_full, 1e-5, "reference: cached against full window");
  expect_near(cpu_cached, ref_cached, 1e-5, "cached: cpu against reference");
}

// Multi-head latent attention: the latent cache and the absorbed key/value projections
// (model/mla_cached.cc) against the full window, which expands every head's keys and values.
TEST(Decode, LatentCacheOfMlaMatchesFullWindow) {
  ModelConfig m = decode_model();
  m.num_kv_heads = 0;
  m.mla = {.q_lora_rank = 12, .kv_lora_rank = 10, .qk_nope_head_dim = 6, .qk_rope_head_dim = 4, .v_head_dim = 8};
  m.rope_scaling = {.factor = 2, .original_max_position_embeddings = 8, .mscale = 1, .mscale_all_dim = 1};
  const KvCache cache(m, 4);
  EXPECT_EQ(cache.heads * cache.head_dim, 10 + 4);  // per token and layer, instead of 4 (10 + 8) K/V floats
  EXPECT_TRUE(cache.v[0].empty());
  std::vector<int> tokens;
  for (int i = 0; i < m.seq_length; ++i) tokens.push_back((i * 29 + 5) % m.vocab_size);
  const int prompt = 4;
  CpuBackend cpu;
  ReferenceBackend reference;
  const auto full = logits_of(m, cpu, false, tokens, prompt);
  const auto cached = logits_of(m, cpu, true, tokens, prompt);
  expect_near(cached, full, 1e-5, "cpu: cached against full window");
  expect_near(logits_of(m, reference, true, tokens, prompt), logits_of(m, reference, false, tokens, prompt), 1e-5,
              "reference: cached against full window");
  for (size_t s = 0; s < full.size(); ++s)  // greedy decoding picks the same tokens
    EXPECT_EQ(std::max_element(cached[s].begin(), cached[s].end()) - cached[s].begin(),
              std::max_element(full[s].begin(), full[s].end()) - full[s].begin())
        << "step " << s;
}

// Qwen3-style attention (q/k RMSNorm before RoPE, head_dim 12 with 4 heads x 12 != hidden 32): the
// cache holds the normalised, rotated keys.
TEST(Decode, QkNormAndExplicitHeadDimCachedLogitsMatchFullWindow) {
  ModelConfig m = decode_model();
  m.head_size = 12;
  m.qk_norm = true;
  std::vector<int> tokens;
  for (int i = 0; i < m.seq_length; ++i) tokens.push_back((i * 29 + 3) % m.vocab_size);
  CpuBackend cpu;
  expect_near(logits_of(m, cpu, true, tokens, 4), logits_of(m, cpu, false, tokens, 4), 1e-5,
              "cpu: cached against full window");
}

}  // namespace
}  // namespace moe4d
