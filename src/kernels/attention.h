// kernels/attention.h — causal multi-head softmax attention, computed as GEMMs per (batch, head).
//
// Layout of the fused projection output (what x @ W_qkv produces): qkv[token, head, {q,k,v}, head_dim],
// i.e. the columns of W_qkv are ordered head-major, and within a head q, k, v are contiguous. A
// tensor-parallel shard of W_qkv is therefore a contiguous block of columns (whole heads).
#pragma once

namespace moe4d {

// qkv:   [batch * seq, heads, 3, head_dim] (RoPE already applied to q and k)
// out:   [batch * seq, heads * head_dim] (heads concatenated in order); overwritten
// probs: [batch, heads, seq, seq] softmax(q k^T / sqrt(head_dim)) with the causal mask (zeros above
//        the diagonal); saved for backward (or recomputed by calling forward again)
void attention_forward(float* out, float* probs, const float* qkv, int batch, int seq, int heads, int head_dim);

// dqkv: [batch * seq, heads, 3, head_dim], overwritten with d loss / d qkv.
// scratch: at least seq * seq floats.
void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* probs, int batch,
                        int seq, int heads, int head_dim);

}  // namespace moe4d
