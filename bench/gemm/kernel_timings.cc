// bench/gemm/kernel_timings.cc — per-call time of the non-GEMM kernels at the "small" config shapes,
// so that the share of a training step spent outside GEMMs can be read off directly.
#include "kernel_timings.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/rng.h"
#include "kernels/attention.h"
#include "kernels/cross_entropy.h"
#include "kernels/embedding.h"
#include "kernels/moe_dispatch.h"
#include "kernels/optimizer_kernels.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/router.h"
#include "kernels/swiglu.h"

namespace moe4d::bench {
namespace {

std::vector<float> normal(size_t n, uint64_t seed, float scale) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = scale * normal_at(seed, i);
  return x;
}

}  // namespace

nlohmann::json time_non_gemm_kernels() {
  constexpr int kBatch = 8, kSeq = 256, kTokens = kBatch * kSeq, kD = 512, kHeads = 8, kHeadDim = 64;
  constexpr int kFfn = 1376, kExperts = 8, kTopK = 2, kVocab = 4096;
  constexpr int kSlots = kTokens * kTopK;
  constexpr int64_t kOptimizerElems = 1 << 22;
  nlohmann::json ms;

  // RMSNorm over the residual stream.
  auto x = normal(static_cast<size_t>(kTokens) * kD, 1, 1.0f), w = normal(kD, 2, 0.1f);
  std::vector<float> y(x.size()), rstd(kTokens), dx(x.size()), dw(kD);
  ms["rmsnorm_forward"] = best_ms([&] { rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), kTokens, kD); });
  ms["rmsnorm_backward"] = best_ms(
      [&] { rmsnorm_backward(dx.data(), dw.data(), y.data(), x.data(), w.data(), rstd.data(), kTokens, kD); });

  // RoPE and attention on the fused qkv activations.
  auto qkv = normal(static_cast<size_t>(kTokens) * 3 * kD, 3, 1.0f);
  RopeTable table(kSeq, kHeadDim);
  ms["rope_forward"] = best_ms([&] { rope_forward(qkv.data(), table, kBatch, kHeads, kHeads); });
  ms["rope_backward"] = best_ms([&] { rope_backward(qkv.data(), table, kBatch, kHeads, kHeads); });
  std::vector<float> attn(static_cast<size_t>(kTokens) * kD), probs(static_cast<size_t>(kBatch) * kHeads * kSeq * kSeq);
  std::vector<float> dqkv(qkv.size()), scratch(static_cast<size_t>(kSeq) * kSeq);
  ms["attention_forward (GEMMs included)"] =
      best_ms([&] { attention_forward(attn.data(), probs.data(), qkv.data(), kBatch, kSeq, kHeads, kHeads, kHeadDim); },
              3);
  ms["attention_backward (GEMMs included)"] = best_ms(
      [&] {
        attention_backward(dqkv.data(), scratch.data(), attn.data(), qkv.data(), probs.data(), kBatch, kSeq, kHeads,
                           kHeads, kHeadDim);
      },
      3);

  // Router.
  auto logits = normal(static_cast<size_t>(kTokens) * kExperts, 4, 1.0f);
  std::vector<float> rprobs(logits.size()), lse(kTokens), topk_w(kSlots), dlogits(logits.size());
  std::vector<int> topk_idx(kSlots), counts(kExperts);
  ms["router_forward"] = best_ms([&] {
    router_forward(rprobs.data(), lse.data(), topk_idx.data(), topk_w.data(), logits.data(), nullptr, kTokens,
                   kExperts, kTopK);
  });
  ms["router_expert_counts"] =
      best_ms([&] { router_expert_counts(counts.data(), topk_idx.data(), kTokens, kExperts, kTopK); });
  const std::vector<float> fcounts(counts.begin(), counts.end());
  const RouterBalance balance = micro_batch_balance(fcounts.data(), kTokens);
  ms["router_aux_and_z_loss"] = best_ms([&] {
    volatile float sink = router_aux_loss(rprobs.data(), balance, kTokens, kExperts, kTopK) +
                          router_z_loss(lse.data(), kTokens);
    (void)sink;
  });
  ms["router_backward"] = best_ms([&] {
    router_backward(dlogits.data(), topk_w.data(), rprobs.data(), lse.data(), topk_idx.data(), topk_w.data(),
                    balance, kTokens, kExperts, kTopK, 0.01f, 0.001f);
  });

  // Dispatch: plan (dropless and capacity factor 1.25), permute, unpermute.
  std::vector<int> offsets(kExperts + 1), row_slot(kSlots), slot_row(kSlots), plan_scratch(kSlots);
  const int capacity = static_cast<int>(std::ceil(static_cast<double>(kSlots) / kExperts * 1.25));
  ms["moe_route_plan (capacity 1.25)"] = best_ms([&] {
    moe_route_plan(offsets.data(), row_slot.data(), slot_row.data(), plan_scratch.data(), topk_idx.data(),
                   topk_w.data(), kTokens, kExperts, kTopK, capacity);
  });
  int rows = 0;
  ms["moe_route_plan (dropless)"] = best_ms([&] {
    rows = moe_route_plan(offsets.data(), row_slot.data(), slot_row.data(), plan_scratch.data(), topk_idx.data(),
                          topk_w.data(), kTokens, kExperts, kTopK, -1);
  });
  std::vector<float> xp(static_cast<size_t>(kSlots) * kD), dyp(xp.size()), dtopk_w(kSlots);
  ms["moe_permute_forward"] =
      best_ms([&] { moe_permute_forward(xp.data(), x.data(), row_slot.data(), rows, kTopK, kD); });
  ms["moe_permute_backward"] =
      best_ms([&] { moe_permute_backward(dx.data(), xp.data(), row_slot.data(), rows, kTopK, kD); });
  ms["moe_unpermute_forward"] = best_ms(
      [&] { moe_unpermute_forward(y.data(), xp.data(), slot_row.data(), topk_w.data(), kTokens, kTopK, kD); });
  ms["moe_unpermute_backward"] = best_ms([&] {
    moe_unpermute_backward(dyp.data(), dtopk_w.data(), x.data(), xp.data(), slot_row.data(), topk_w.data(), kTokens,
                           kTopK, kD);
  });

  // SwiGLU gate over every expert row.
  const int64_t gate_n = static_cast<int64_t>(kSlots) * kFfn;
  auto a = normal(gate_n, 5, 2.0f), b = normal(gate_n, 6, 1.0f);
  std::vector<float> g(gate_n), da(gate_n), db(gate_n);
  ms["swiglu_forward"] = best_ms([&] { swiglu_forward(g.data(), a.data(), b.data(), gate_n); }, 3);
  ms["swiglu_backward"] =
      best_ms([&] { swiglu_backward(da.data(), db.data(), g.data(), a.data(), b.data(), gate_n); }, 3);

  // Cross-entropy over the full vocabulary (tp = 1), and the embedding.
  auto ce_logits = normal(static_cast<size_t>(kTokens) * kVocab, 7, 2.0f);
  std::vector<float> m(kTokens), s(kTokens), tl(kTokens), loss(kTokens), ce_dlogits(ce_logits.size());
  std::vector<int> targets(kTokens);
  for (int t = 0; t < kTokens; ++t) targets[t] = (t * 7919) % kVocab;
  ms["ce_row_max"] = best_ms([&] { ce_row_max(m.data(), ce_logits.data(), kTokens, kVocab); });
  ms["ce_row_sumexp"] = best_ms([&] { ce_row_sumexp(s.data(), ce_logits.data(), m.data(), kTokens, kVocab); });
  ms["ce_target_logit_and_loss"] = best_ms([&] {
    ce_target_logit(tl.data(), ce_logits.data(), targets.data(), kTokens, kVocab, 0);
    ce_loss(loss.data(), m.data(), s.data(), tl.data(), kTokens);
  });
  ms["ce_backward"] = best_ms([&] {
    ce_backward(ce_dlogits.data(), ce_logits.data(), m.data(), s.data(), targets.data(), 1.0f / kTokens, kTokens,
                kVocab, 0);
  });
  auto embed = normal(static_cast<size_t>(kVocab) * kD, 8, 0.02f);
  std::vector<float> dembed(embed.size());
  ms["embedding_forward"] =
      best_ms([&] { embedding_forward(y.data(), embed.data(), targets.data(), kTokens, kD, 0, kVocab); });
  ms["embedding_backward"] =
      best_ms([&] { embedding_backward(dembed.data(), y.data(), targets.data(), kTokens, kD, 0, kVocab); });

  // Optimizer-side element-wise kernels, per 4M parameters.
  auto param = normal(kOptimizerElems, 9, 0.02f), grad = normal(kOptimizerElems, 10, 0.001f);
  std::vector<float> mom(kOptimizerElems), var(kOptimizerElems);
  AdamWStep step;
  step.lr = 1e-4f;
  step.weight_decay = 0.1f;
  ms["adamw_update (4M params)"] =
      best_ms([&] { adamw_update(param.data(), grad.data(), mom.data(), var.data(), kOptimizerElems, step); });
  ms["sum_squares (4M)"] = best_ms([&] {
    volatile double sink = sum_squares(grad.data(), kOptimizerElems);
    (void)sink;
  });
  ms["all_finite (4M)"] = best_ms([&] {
    volatile bool sink = all_finite(grad.data(), kOptimizerElems);
    (void)sink;
  });
  ms["axpy (4M)"] = best_ms([&] { axpy(mom.data(), grad.data(), 0.5f, kOptimizerElems); });
  ms["scale_inplace (4M)"] = best_ms([&] { scale_inplace(mom.data(), 0.5f, kOptimizerElems); });

  nlohmann::json out;
  out["shapes"] = {{"tokens", kTokens},    {"batch", kBatch},   {"seq", kSeq},     {"hidden", kD},
                   {"heads", kHeads},      {"head_dim", kHeadDim}, {"ffn", kFfn}, {"experts", kExperts},
                   {"top_k", kTopK},       {"vocab", kVocab},   {"capacity", capacity}};
  out["ms"] = ms;
  return out;
}

}  // namespace moe4d::bench
