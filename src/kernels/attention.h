// kernels/attention.h — causal softmax attention with grouped-query heads, as GEMMs per (batch, head).
//
// `heads` query heads share `kv_heads` key/value heads (kv_heads divides heads; kv_heads == heads is
// multi-head attention, 1 is multi-query): query head h reads KV head h / (heads / kv_heads).
//
// Layout of the fused projection output (what x @ W_qkv produces), group-major:
//   qkv[token, group, slot, head_dim],  group in [0, kv_heads),  slot in [0, g + 2),  g = heads / kv_heads
// where slots 0..g-1 are the group's query heads (query head group * g + slot), slot g its key head and
// slot g + 1 its value head. With kv_heads == heads this is [token, head, {q,k,v}, head_dim]. A tensor-
// parallel shard of W_qkv is a contiguous block of columns: whole groups, i.e. a rank's query heads
// together with the KV heads they read (as Megatron-LM lays out its fused GQA projection).
#pragma once

namespace moe4d {

// qkv:   [batch * seq, kv_heads, heads / kv_heads + 2, head_dim] (RoPE already applied to q and k)
// out:   [batch * seq, heads * head_dim] (query heads concatenated in order); overwritten
// probs: [batch, heads, seq, seq] softmax(q k^T / sqrt(head_dim)) with the causal mask (zeros above
//        the diagonal); saved for backward (or recomputed by calling forward again)
void attention_forward(float* out, float* probs, const float* qkv, int batch, int seq, int heads, int kv_heads,
                       int head_dim);

// dqkv: same layout as qkv, overwritten with d loss / d qkv (a KV head's gradient sums over its
// query heads). scratch: at least seq * seq floats.
void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* probs, int batch,
                        int seq, int heads, int kv_heads, int head_dim);

// One decoding step over a KV cache: for each of `tokens` new tokens at positions start + t,
//   out[t, h * head_dim + i] = sum over p <= start + t of softmax_p(q_{t,h} . k_p / sqrt(head_dim)) v_p[i]
// with q_{t,h} query head h of qkv [tokens, kv_heads, heads / kv_heads + 2, head_dim] (RoPE applied),
// and k_p, v_p the KV head h / (heads / kv_heads) of position p in keys, values [start + tokens,
// kv_heads, head_dim] (the cache, already holding these tokens' keys and values). scores: scratch of
// at least start + tokens floats; out [tokens, heads * head_dim] overwritten.
void attention_decode(float* out, float* scores, const float* qkv, const float* keys, const float* values, int tokens,
                      int start, int heads, int kv_heads, int head_dim);

}  // namespace moe4d
