// model/mla_block.h — multi-head latent attention (DeepSeek-V2/V3; docs/mla.md), as Hugging Face's
// DeepseekV3Attention computes it, Megatron tensor parallel over heads.
//
// With x = RMSNorm(x_in), H heads, widths nope = qk_nope_head_dim, rope = qk_rope_head_dim, v = v_head_dim:
//   q       = q_b(RMSNorm_q(q_a(x)))   [T, H (nope + rope)]   (q(x) when q_lora_rank is 0)
//   [c, kr] = kv_a(x)                  [T, kv_lora_rank + rope]
//   [k, v]  = kv_b(RMSNorm_kv(c))      [T, H (nope + v)]       (per head: its k_nope, then its v)
//   per head h: q_h = [q_nope, RoPE(q_rope)], k_h = [k_nope, RoPE(kr)] (one rotary key for all heads),
//   out = o(softmax(q_h k_h^T * mla_softmax_scale) v_h, heads concatenated);  x_out = x_in + out.
// RoPE turns pairs (2i, 2i+1) of the rotary part: HF's rope_interleave layout (DeepSeek-V3's), whose
// permutation of q_rope and k_rope leaves every dot product as it is. The latent norms use eps 1e-6
// (HF's DeepseekV3RMSNorm default). Weights are stored [in, out]:
//   attn.q_a.weight [d, q_lora_rank], attn.q_a_norm.weight [q_lora_rank], attn.q_b.weight
//   [q_lora_rank, H (nope + rope)] (or attn.q.weight [d, H (nope + rope)]), attn.kv_a.weight
//   [d, kv_lora_rank + rope], attn.kv_a_norm.weight [kv_lora_rank], attn.kv_b.weight
//   [kv_lora_rank, H (nope + v)], attn.out.weight [H v, d].
// Tensor parallel: q_b (or q), kv_b are column-parallel and out row-parallel by heads; q_a, kv_a and
// the two latent norms are replicated, each TP rank computing them for all tokens; their gradients
// (which each rank sees only through its own heads) are summed over TP.
//
// The attention core runs the backend's causal attention with one KV head per query head on heads of
// max(nope + rope, v) elements ([q; k; v] per head, zero-padded), q pre-scaled so that the kernel's
// 1/sqrt(head) becomes the MLA scale; the rotary parts go through the backend's RoPE.
#pragma once

#include "model/block_context.h"
#include "model/kv_cache.h"

namespace moe4d {

class MlaBlock {
 public:
  MlaBlock(int layer, const ModelConfig& model, const ParallelContext& pc, ParamStore& params);

  // As AttentionBlock::forward / backward (model/attention_block.h).
  void* forward(const float* x_in, float* x_out, BlockContext& ctx) const;
  void backward(float* dx, const float* x_in, const void* saved, BlockContext& ctx) const;

  // Decoding over a latent KV cache (model/mla_cached.cc): the cache holds per position the
  // normalised latent c and the rotated key kr (kv_lora_rank + rope floats, shared by all heads);
  // the key and value projections are absorbed into the query and the output (DeepSeek's inference).
  void forward_cached(const float* x_in, float* x_out, KvCache& cache, int layer, BlockContext& ctx) const;

 private:
  // q [T, lh (nope + rope)] of the normalised input xn [T, d]; with q_lora_rank also qa [T, q_lora]
  // (q_a's output), its rstd [T] and its norm qan [T, q_lora] (q_b's input).
  void project_q(const float* xn, float* q, float* qa, float* qa_rstd, float* qan, int T, BlockContext& ctx) const;
  // cn [T, kv_lora] = RMSNorm_kv(c), c [T, kv_lora] the latent of kva [T, kv_lora + rope] (copied
  // out), c_rstd [T].
  void norm_latent(const float* kva, float* c, float* c_rstd, float* cn, int T, BlockContext& ctx) const;
  // pe [T, lh + 2, rope]: slot h < lh the rotary query part of head h of q, slot lh the rotary key
  // of kva (slot lh + 1 unused), the layout of the backend's RoPE with one KV head.
  void gather_rotary(float* pe, const float* q, const float* kva, int T, BlockContext& ctx) const;

  int norm_id_, q_a_id_ = -1, q_norm_id_ = -1, q_id_, kv_a_id_, kv_norm_id_, kv_b_id_, out_id_;
  int local_heads_, hidden_, q_lora_, kv_lora_, nope_, rope_, v_;
  double softmax_scale_;  // model/rope_scaling.h: mla_softmax_scale
  int head_;              // padded head of the attention core: max(nope + rope, v)
};

}  // namespace moe4d
