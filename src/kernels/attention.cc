// kernels/attention.cc — causal softmax attention as GEMMs per (batch, head).
//
// Causality is exploited by splitting the query rows into blocks of kBlock: a row block [r0, r1)
// only attends to keys [0, r1), so its score and output GEMMs use r1 columns instead of seq, which
// skips most of the masked upper triangle (about half the attention FLOPs at long sequences). The
// skipped entries are exactly zero in the math, so the result is unchanged.
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/check.h"
#include "kernels/gemm.h"
#include "kernels/vec_math.h"

namespace moe4d {
namespace {

constexpr int kBlock = 64;

// Strided views of one (batch, head) slice of the qkv activations and of the attention output.
struct HeadView {
  int64_t qkv_stride;  // elements between consecutive tokens of qkv: (heads + 2 kv_heads) * head_dim
  int64_t out_stride;  // elements between consecutive tokens of out: heads * head_dim
  int64_t q, k, v;     // offsets of the first token's q/k/v in qkv
  int64_t out;         // offset of the first token's output block in out
  int64_t probs;       // offset of the [seq, seq] probability matrix
};

// Query head h of group h / g reads slot h % g; the group's k and v follow its g query slots.
HeadView head_view(int b, int h, int seq, int heads, int kv_heads, int head_dim) {
  const int g = heads / kv_heads;
  const int64_t group = h / g;
  HeadView view;
  view.qkv_stride = static_cast<int64_t>(heads + 2 * kv_heads) * head_dim;
  view.out_stride = static_cast<int64_t>(heads) * head_dim;
  const int64_t token0 = static_cast<int64_t>(b) * seq * view.qkv_stride;
  const int64_t group0 = token0 + group * (g + 2) * head_dim;
  view.q = group0 + static_cast<int64_t>(h % g) * head_dim;
  view.k = group0 + static_cast<int64_t>(g) * head_dim;
  view.v = view.k + head_dim;
  view.out = static_cast<int64_t>(b) * seq * view.out_stride + static_cast<int64_t>(h) * head_dim;
  view.probs = (static_cast<int64_t>(b) * heads + h) * seq * seq;
  return view;
}

// Row i of scaled scores (length i + 1) -> softmax in place; entries (i, seq) set to zero.
void causal_softmax_row(float* row, int i, int seq) {
  const int len = i + 1;
  const float m = vec::max(row, len);
  vec::map_lanes(len, [&](int64_t j, auto tag) {
    using V = decltype(tag);
    vec::put(row + j, vec::exp(vec::get<V>(row + j) - m));
  });
  const float inv = 1.0f / vec::sum(row, len);
  for (int j = 0; j < len; ++j) row[j] *= inv;
  std::fill(row + len, row + seq, 0.0f);
}

}  // namespace

void attention_forward(float* out, float* probs, const float* qkv, int batch, int seq, int heads, int kv_heads,
                       int head_dim) {
  MOE4D_CHECK(batch >= 0 && seq > 0 && heads > 0 && head_dim > 0);
  MOE4D_CHECK(kv_heads > 0 && heads % kv_heads == 0);
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h) {
      const HeadView hv = head_view(b, h, seq, heads, kv_heads, head_dim);
      const int ld = static_cast<int>(hv.qkv_stride);
      float* p = probs + hv.probs;
      for (int r0 = 0; r0 < seq; r0 += kBlock) {
        const int r1 = std::min(seq, r0 + kBlock);
        float* p_block = p + static_cast<int64_t>(r0) * seq;
        // scores[r0:r1, 0:r1] = scale * q[r0:r1] k[0:r1]^T
        gemm(false, true, r1 - r0, r1, head_dim, scale, qkv + hv.q + r0 * hv.qkv_stride, ld, qkv + hv.k, ld, 0.0f,
             p_block, seq);
        for (int i = r0; i < r1; ++i) causal_softmax_row(p + static_cast<int64_t>(i) * seq, i, seq);
        // out[r0:r1] = probs[r0:r1, 0:r1] v[0:r1]
        gemm(false, false, r1 - r0, head_dim, r1, 1.0f, p_block, seq, qkv + hv.v, ld, 0.0f,
             out + hv.out + r0 * hv.out_stride, static_cast<int>(hv.out_stride));
      }
    }
}

// With S the scaled scores and P = softmax(S) row-wise:
//   dV = P^T dO,  dP = dO V^T,  dS = P * (dP - rowsum(dP * P)),  dQ = scale dS K,  dK = scale dS^T Q.
// Pass 1 walks row blocks (dP, dS, dQ need rows [r0, r1) and keys [0, r1)); pass 2 walks column blocks
// [c0, c1), whose dK and dV only receive contributions from query rows i >= c0. The query heads of a
// KV group run consecutively: the first writes its group's dK and dV, the others add to them.
void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* probs, int batch,
                        int seq, int heads, int kv_heads, int head_dim) {
  MOE4D_CHECK(batch >= 0 && seq > 0 && heads > 0 && head_dim > 0);
  MOE4D_CHECK(kv_heads > 0 && heads % kv_heads == 0);
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const int g = heads / kv_heads;
  float* ds = scratch;  // [seq, seq]: dP, turned into dS in place; only the lower triangle is ever read
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h) {
      const HeadView hv = head_view(b, h, seq, heads, kv_heads, head_dim);
      const float kv_beta = h % g == 0 ? 0.0f : 1.0f;
      const int ld = static_cast<int>(hv.qkv_stride);
      const int ldo = static_cast<int>(hv.out_stride);
      const float* p = probs + hv.probs;
      const float* d_o = dout + hv.out;
      for (int r0 = 0; r0 < seq; r0 += kBlock) {
        const int r1 = std::min(seq, r0 + kBlock);
        float* ds_block = ds + static_cast<int64_t>(r0) * seq;
        // dP[r0:r1, 0:r1] = dO[r0:r1] V[0:r1]^T
        gemm(false, true, r1 - r0, r1, head_dim, 1.0f, d_o + r0 * hv.out_stride, ldo, qkv + hv.v, ld, 0.0f, ds_block,
             seq);
        for (int i = r0; i < r1; ++i) {
          float* dsi = ds + static_cast<int64_t>(i) * seq;
          const float* pi = p + static_cast<int64_t>(i) * seq;
          const float row_dot = vec::dot(dsi, pi, i + 1);
          for (int j = 0; j <= i; ++j) dsi[j] = pi[j] * (dsi[j] - row_dot);
          std::fill(dsi + i + 1, dsi + r1, 0.0f);  // the diagonal block is read whole by pass 2
        }
        // dQ[r0:r1] = scale dS[r0:r1, 0:r1] K[0:r1]
        gemm(false, false, r1 - r0, head_dim, r1, scale, ds_block, seq, qkv + hv.k, ld, 0.0f,
             dqkv + hv.q + r0 * hv.qkv_stride, ld);
      }
      for (int c0 = 0; c0 < seq; c0 += kBlock) {
        const int c1 = std::min(seq, c0 + kBlock);
        const int rows = seq - c0;
        // dK[c0:c1] = scale dS[c0:seq, c0:c1]^T Q[c0:seq];  dV[c0:c1] = P[c0:seq, c0:c1]^T dO[c0:seq]
        gemm(true, false, c1 - c0, head_dim, rows, scale, ds + static_cast<int64_t>(c0) * seq + c0, seq,
             qkv + hv.q + c0 * hv.qkv_stride, ld, kv_beta, dqkv + hv.k + c0 * hv.qkv_stride, ld);
        gemm(true, false, c1 - c0, head_dim, rows, 1.0f, p + static_cast<int64_t>(c0) * seq + c0, seq,
             d_o + c0 * hv.out_stride, ldo, kv_beta, dqkv + hv.v + c0 * hv.qkv_stride, ld);
      }
    }
}

void attention_decode(float* out, float* scores, const float* qkv, const float* keys, const float* values, int tokens,
                      int start, int heads, int kv_heads, int head_dim) {
  MOE4D_CHECK(kv_heads > 0 && heads % kv_heads == 0);
  const int hd = head_dim, group = heads / kv_heads;  // query heads per KV head
  const int64_t ld = int64_t(heads) * hd, lqkv = int64_t(heads + 2 * kv_heads) * hd, lkv = int64_t(kv_heads) * hd;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int t = 0; t < tokens; ++t) {
    const int last = start + t;  // causal: positions 0..last
    for (int h = 0; h < heads; ++h) {
      const int j = h / group;
      const float* q = qkv + t * lqkv + (int64_t(j) * (group + 2) + h % group) * hd;
      float top = -INFINITY;
      for (int p = 0; p <= last; ++p) {
        const float* k = keys + p * lkv + int64_t(j) * hd;
        float dot = 0.0f;
        for (int i = 0; i < hd; ++i) dot += q[i] * k[i];
        scores[p] = dot * scale;
        top = std::max(top, scores[p]);
      }
      float sum = 0.0f;
      for (int p = 0; p <= last; ++p) {
        scores[p] = std::exp(scores[p] - top);
        sum += scores[p];
      }
      float* o = out + t * ld + int64_t(h) * hd;
      for (int i = 0; i < hd; ++i) o[i] = 0.0f;
      for (int p = 0; p <= last; ++p) {
        const float w = scores[p] / sum;
        const float* v = values + p * lkv + int64_t(j) * hd;
        for (int i = 0; i < hd; ++i) o[i] += w * v[i];
      }
    }
  }
}

}  // namespace moe4d
