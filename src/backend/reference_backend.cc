// backend/reference_backend.cc — plain loops, fp64 accumulation (see the header).
#include "backend/reference_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/check.h"
#include "kernels/precision.h"

namespace moe4d {
namespace {

using I = int64_t;

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// One query head's view of the grouped qkv layout (kernels/attention.h).
struct Heads {
  I stride, q0, k0, v0;  // elements per token; offsets of query head h's q, and its group's k, v
};
Heads heads_of(int h, int heads, int kv_heads, int head_dim) {
  const int g = heads / kv_heads;
  const I group0 = I(h / g) * (g + 2) * head_dim;
  return {I(heads + 2 * kv_heads) * head_dim, group0 + I(h % g) * head_dim, group0 + I(g) * head_dim,
          group0 + I(g + 1) * head_dim};
}

// The router's normalised scores q of one token (softmax: the scores; sigmoid: s / sum s), fp64.
double score_sum(const float* p, int experts) {
  double s = 0;
  for (int e = 0; e < experts; ++e) s += p[e];
  return s;
}

}  // namespace

// ---- memory ----

void ReferenceBackend::fill(float* x, float value, int64_t n) {
  for (I i = 0; i < n; ++i) x[i] = value;
}

void ReferenceBackend::zero(void* x, size_t bytes) {
  auto* p = static_cast<unsigned char*>(x);
  for (size_t i = 0; i < bytes; ++i) p[i] = 0;
}

void ReferenceBackend::copy(void* dst, const void* src, size_t bytes) {
  if (bytes > 0 && dst != src) std::memmove(dst, src, bytes);
}

void ReferenceBackend::copy_rows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes,
                                 size_t rows) {
  for (size_t r = 0; r < rows; ++r)
    copy(static_cast<char*>(dst) + r * dst_pitch, static_cast<const char*>(src) + r * src_pitch, row_bytes);
}

// ---- GEMM ----

void ReferenceBackend::gemm(DType compute, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                            int lda, const float* b, int ldb, float beta, float* c, int ldc, bool round_c) {
  auto op = [compute](float x) { return double(compute == DType::kF32 ? x : round_to_precision(compute, x)); };
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double acc = 0;
      for (int p = 0; p < k; ++p) {
        const float av = trans_a ? a[I(p) * lda + i] : a[I(i) * lda + p];
        const float bv = trans_b ? b[I(j) * ldb + p] : b[I(p) * ldb + j];
        acc += op(av) * op(bv);
      }
      float& out = c[I(i) * ldc + j];
      const double prior = beta == 0.0f ? 0.0 : double(beta) * out;
      out = float(double(alpha) * acc + prior);
      if (round_c && compute != DType::kF32) out = round_to_precision(compute, out);
    }
}

void ReferenceBackend::grouped_gemm(DType compute, bool trans_b, int groups, const int* offsets, int n, int k,
                                    float alpha, const float* a, int lda, const float* b, int64_t b_stride, int ldb,
                                    float beta, float* c, int ldc, bool round_c) {
  for (int g = 0; g < groups; ++g)
    gemm(compute, false, trans_b, offsets[g + 1] - offsets[g], n, k, alpha, a + I(offsets[g]) * lda, lda,
         b + g * b_stride, ldb, beta, c + I(offsets[g]) * ldc, ldc, round_c);
}

// ---- casts ----

void ReferenceBackend::round_to(DType type, const float* in, float* out, int64_t n) {
  for (I i = 0; i < n; ++i) out[i] = round_to_precision(type, in[i]);
}

void ReferenceBackend::to_half(DType type, const float* in, uint16_t* out, int64_t n) {
  MOE4D_CHECK(is_half_precision(type));
  for (I i = 0; i < n; ++i) out[i] = type == DType::kBF16 ? bf16_bits_from_float(in[i]) : fp16_bits_from_float(in[i]);
}

void ReferenceBackend::from_half(DType type, const uint16_t* in, float* out, int64_t n) {
  MOE4D_CHECK(is_half_precision(type));
  for (I i = 0; i < n; ++i) out[i] = type == DType::kBF16 ? float_from_bf16_bits(in[i]) : float_from_fp16_bits(in[i]);
}

// ---- element-wise and reductions ----

void ReferenceBackend::axpy(float* y, const float* x, float alpha, int64_t n) {
  for (I i = 0; i < n; ++i) y[i] = float(double(y[i]) + double(alpha) * x[i]);
}

void ReferenceBackend::scale(float* x, float alpha, int64_t n) {
  for (I i = 0; i < n; ++i) x[i] = float(double(x[i]) * alpha);
}

double ReferenceBackend::sum_squares(const float* x, int64_t n) {
  double s = 0;
  for (I i = 0; i < n; ++i) s += double(x[i]) * x[i];
  return s;
}

bool ReferenceBackend::all_finite(const float* x, int64_t n) {
  for (I i = 0; i < n; ++i)
    if (!std::isfinite(x[i])) return false;
  return true;
}

// ---- RMSNorm ----

void ReferenceBackend::rmsnorm_forward(float* out, float* rstd, const float* x, const float* w, int n, int d,
                                       float eps) {
  for (int i = 0; i < n; ++i) {
    const float* xi = x + I(i) * d;
    double ss = 0;
    for (int j = 0; j < d; ++j) ss += double(xi[j]) * xi[j];
    const double r = 1.0 / std::sqrt(ss / d + eps);
    rstd[i] = float(r);
    for (int j = 0; j < d; ++j) out[I(i) * d + j] = float(xi[j] * r * w[j]);
  }
}

void ReferenceBackend::rmsnorm_backward(float* dx, float* dw, const float* dout, const float* x, const float* w,
                                        const float* rstd, int n, int d) {
  for (int i = 0; i < n; ++i) {
    const float* xi = x + I(i) * d;
    const float* gi = dout + I(i) * d;
    const double r = rstd[i];
    double proj = 0;
    for (int j = 0; j < d; ++j) proj += double(gi[j]) * w[j] * xi[j];
    const double c = proj * r * r * r / d;
    for (int j = 0; j < d; ++j) {
      dx[I(i) * d + j] = float(dx[I(i) * d + j] + (r * w[j] * gi[j] - c * xi[j]));
      dw[j] = float(dw[j] + double(gi[j]) * xi[j] * r);
    }
  }
}

// ---- RoPE ----

namespace {
// `batch` sequences of `seq` tokens at positions first .. first + seq - 1.
void rope_rotate(float* qkv, const RopeTable& table, int batch, int seq, int first, int heads, int kv_heads,
                 double sign) {
  MOE4D_CHECK(kv_heads > 0 && heads % kv_heads == 0 && first >= 0 && first + seq <= table.seq);
  const int hd = table.head_dim, half = hd / 2, g = heads / kv_heads;
  const I stride = I(heads + 2 * kv_heads) * hd;
  for (int b = 0; b < batch; ++b)
    for (int t = 0; t < seq; ++t)
      for (int grp = 0; grp < kv_heads; ++grp)
        for (int slot = 0; slot <= g; ++slot) {
          const int p = first + t;
          float* v = qkv + (I(b) * seq + t) * stride + (I(grp) * (g + 2) + slot) * hd;
          for (int i = 0; i < half; ++i) {
            const double c = table.cos[I(p) * half + i], s = sign * table.sin[I(p) * half + i];
            const double x0 = v[2 * i], x1 = v[2 * i + 1];
            v[2 * i] = float(x0 * c - x1 * s);
            v[2 * i + 1] = float(x0 * s + x1 * c);
          }
        }
}
}  // namespace

void ReferenceBackend::rope_forward(float* qkv, const RopeTable& table, int batch, int heads, int kv_heads) {
  rope_rotate(qkv, table, batch, table.seq, 0, heads, kv_heads, 1.0);
}

void ReferenceBackend::rope_forward_at(float* qkv, const RopeTable& table, int first, int tokens, int heads,
                                       int kv_heads) {
  rope_rotate(qkv, table, 1, tokens, first, heads, kv_heads, 1.0);
}

void ReferenceBackend::rope_backward(float* dqkv, const RopeTable& table, int batch, int heads, int kv_heads) {
  rope_rotate(dqkv, table, batch, table.seq, 0, heads, kv_heads, -1.0);
}

// ---- attention: every (query, key) pair, no blocking ----

void ReferenceBackend::attention_forward(float* out, float* probs, const float* qkv, int batch, int seq, int heads,
                                         int kv_heads, int head_dim) {
  MOE4D_CHECK(kv_heads > 0 && heads % kv_heads == 0);
  const double scale = 1.0 / std::sqrt(double(head_dim));
  std::vector<double> p(seq);
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h) {
      const Heads v = heads_of(h, heads, kv_heads, head_dim);
      const float* base = qkv + I(b) * seq * v.stride;
      float* pr = probs + (I(b) * heads + h) * seq * seq;
      for (int i = 0; i < seq; ++i) {
        double mx = -INFINITY;
        for (int j = 0; j <= i; ++j) {
          double dot = 0;
          for (int c = 0; c < head_dim; ++c)
            dot += double(base[i * v.stride + v.q0 + c]) * base[j * v.stride + v.k0 + c];
          p[j] = dot * scale;
          mx = std::max(mx, p[j]);
        }
        double sum = 0;
        for (int j = 0; j <= i; ++j) sum += (p[j] = std::exp(p[j] - mx));
        for (int j = 0; j < seq; ++j) pr[I(i) * seq + j] = j <= i ? float(p[j] / sum) : 0.0f;
        float* o = out + (I(b) * seq + i) * heads * head_dim + I(h) * head_dim;
        for (int c = 0; c < head_dim; ++c) {
          double acc = 0;
          for (int j = 0; j <= i; ++j) acc += p[j] / sum * base[j * v.stride + v.v0 + c];
          o[c] = float(acc);
        }
      }
    }
}

void ReferenceBackend::attention_decode(float* out, float*, const float* qkv, const float* keys, const float* values,
                                        int tokens, int start, int heads, int kv_heads, int head_dim) {
  MOE4D_CHECK(kv_heads > 0 && heads % kv_heads == 0);
  const double scale = 1.0 / std::sqrt(double(head_dim));
  const I kv_stride = I(kv_heads) * head_dim;
  std::vector<double> p(size_t(start + tokens));
  for (int t = 0; t < tokens; ++t)
    for (int h = 0; h < heads; ++h) {
      const Heads v = heads_of(h, heads, kv_heads, head_dim);
      const float* q = qkv + I(t) * v.stride + v.q0;
      const I kv0 = I(h / (heads / kv_heads)) * head_dim;
      double mx = -INFINITY;
      for (int j = 0; j <= start + t; ++j) {
        double dot = 0;
        for (int c = 0; c < head_dim; ++c) dot += double(q[c]) * keys[j * kv_stride + kv0 + c];
        p[j] = dot * scale;
        mx = std::max(mx, p[j]);
      }
      double sum = 0;
      for (int j = 0; j <= start + t; ++j) sum += (p[j] = std::exp(p[j] - mx));
      float* o = out + I(t) * heads * head_dim + I(h) * head_dim;
      for (int c = 0; c < head_dim; ++c) {
        double acc = 0;
        for (int j = 0; j <= start + t; ++j) acc += p[j] / sum * values[j * kv_stride + kv0 + c];
        o[c] = float(acc);
      }
    }
}

void ReferenceBackend::attention_backward(float* dqkv, float*, const float* dout, const float* qkv, const float* probs,
                                          int batch, int seq, int heads, int kv_heads, int head_dim) {
  MOE4D_CHECK(kv_heads > 0 && heads % kv_heads == 0);
  const double scale = 1.0 / std::sqrt(double(head_dim));
  const I stride = I(heads + 2 * kv_heads) * head_dim;
  std::vector<double> acc(size_t(I(batch) * seq * stride), 0.0), ds(seq);
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h) {
      const Heads v = heads_of(h, heads, kv_heads, head_dim);
      const float* base = qkv + I(b) * seq * stride;
      double* dbase = acc.data() + I(b) * seq * stride;
      const float* pr = probs + (I(b) * heads + h) * seq * seq;
      for (int i = 0; i < seq; ++i) {
        const float* go = dout + (I(b) * seq + i) * heads * head_dim + I(h) * head_dim;
        double row = 0;
        for (int j = 0; j <= i; ++j) {
          double dp = 0;
          for (int c = 0; c < head_dim; ++c) dp += double(go[c]) * base[j * stride + v.v0 + c];
          ds[j] = dp;
          row += dp * pr[I(i) * seq + j];
        }
        for (int j = 0; j <= i; ++j) {
          const double pij = pr[I(i) * seq + j], dsij = pij * (ds[j] - row) * scale;
          for (int c = 0; c < head_dim; ++c) {
            dbase[i * stride + v.q0 + c] += dsij * base[j * stride + v.k0 + c];
            dbase[j * stride + v.k0 + c] += dsij * base[i * stride + v.q0 + c];
            dbase[j * stride + v.v0 + c] += pij * go[c];
          }
        }
      }
    }
  for (size_t i = 0; i < acc.size(); ++i) dqkv[i] = float(acc[i]);
}

// ---- SwiGLU ----

void ReferenceBackend::swiglu_forward(float* g, const float* a, const float* b, int64_t n) {
  for (I i = 0; i < n; ++i) g[i] = float(a[i] * sigmoid(a[i]) * b[i]);
}

void ReferenceBackend::swiglu_backward(float* da, float* db, const float* dg, const float* a, const float* b,
                                       int64_t n) {
  for (I i = 0; i < n; ++i) {
    const double av = a[i], bv = b[i], gv = dg[i], s = sigmoid(av), silu = av * s;
    da[i] = float(gv * bv * (s + silu * (1 - s)));
    db[i] = float(gv * silu);
  }
}

// ---- router ----

void ReferenceBackend::router_forward(float* scores, float* lse, int* topk_idx, float* topk_w, const float* logits,
                                      const float* select_bias, int tokens, int experts, int k,
                                      const RouterScoring& scoring) {
  MOE4D_CHECK(experts > 0 && k > 0 && k <= experts);
  std::vector<int> order(experts);
  for (int t = 0; t < tokens; ++t) {
    const float* l = logits + I(t) * experts;
    float* p = scores + I(t) * experts;
    double mx = -INFINITY, sum = 0;
    for (int e = 0; e < experts; ++e) mx = std::max(mx, double(l[e]));
    for (int e = 0; e < experts; ++e) sum += std::exp(l[e] - mx);
    lse[t] = float(mx + std::log(sum));
    for (int e = 0; e < experts; ++e) p[e] = float(scoring.sigmoid ? sigmoid(l[e]) : std::exp(l[e] - mx) / sum);
    // The k best by selection score (descending; ties to the lower index): a stable sort; with
    // groups, of the experts in the group_topk groups whose two best selection scores sum highest.
    auto sel = [&](int e) { return float(p[e] + (select_bias ? select_bias[e] : 0.0f)); };
    std::vector<bool> eligible(experts, true);
    if (scoring.groups > 1) {
      const int size = experts / scoring.groups;
      std::vector<float> group_score(scoring.groups);
      for (int g = 0; g < scoring.groups; ++g) {
        std::vector<float> members;
        for (int e = g * size; e < (g + 1) * size; ++e) members.push_back(sel(e));
        std::sort(members.begin(), members.end(), std::greater<>());
        group_score[g] = members[0] + members[1];
      }
      std::vector<int> groups(scoring.groups);
      std::iota(groups.begin(), groups.end(), 0);
      std::stable_sort(groups.begin(), groups.end(), [&](int x, int y) { return group_score[x] > group_score[y]; });
      for (int e = 0; e < experts; ++e)
        eligible[e] = std::find(groups.begin(), groups.begin() + scoring.group_topk, e / size) !=
                      groups.begin() + scoring.group_topk;
    }
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
      return eligible[x] != eligible[y] ? bool(eligible[x]) : sel(x) > sel(y);
    });
    double picked = 0;
    for (int j = 0; j < k; ++j) picked += p[order[j]];
    for (int j = 0; j < k; ++j) {
      topk_idx[I(t) * k + j] = order[j];
      const double w = p[order[j]];
      topk_w[I(t) * k + j] = float(scoring.scaling * (!scoring.normalize ? w : picked > 0 ? w / picked : 0.0));
    }
  }
}

void ReferenceBackend::router_expert_counts(int* counts, const int* topk_idx, int tokens, int experts, int k) {
  for (int e = 0; e < experts; ++e) counts[e] = 0;
  for (I s = 0; s < I(tokens) * k; ++s) {
    MOE4D_CHECK(topk_idx[s] >= 0 && topk_idx[s] < experts);
    ++counts[topk_idx[s]];
  }
}

float ReferenceBackend::router_aux_loss(const float* scores, const RouterBalance& balance, int tokens, int experts,
                                        int k, const RouterScoring& scoring) {
  const double all = balance.tokens;
  double acc = 0;
  for (int t = 0; t < tokens; ++t) {
    const float* p = scores + I(t) * experts;
    const float* counts = balance.counts + I(t / (tokens / balance.groups)) * experts;
    const double z = scoring.sigmoid ? score_sum(p, experts) : 1.0;
    for (int e = 0; e < experts; ++e) acc += z > 0 ? double(counts[e]) * p[e] / z : 0.0;
  }
  return tokens == 0 ? 0.0f : float(acc * balance.weight * experts / (all * all * k));
}

float ReferenceBackend::router_z_loss(const float* lse, int tokens, int total_tokens) {
  double acc = 0;
  for (int t = 0; t < tokens; ++t) acc += double(lse[t]) * lse[t];
  return tokens == 0 ? 0.0f : float(acc / (total_tokens > 0 ? total_tokens : tokens));
}

void ReferenceBackend::router_backward(float* dlogits, const float* dtopk_w, const float* scores, const float* lse,
                                       const int* topk_idx, const float* topk_w, const RouterBalance& balance,
                                       int tokens, int experts, int k, float aux_coef, float z_coef,
                                       const RouterScoring& scoring, const float* logits, int total_tokens) {
  MOE4D_CHECK_MSG(!scoring.sigmoid || logits != nullptr, "sigmoid router backward needs the logits");
  const double all = total_tokens > 0 ? total_tokens : tokens;
  const double aux = double(aux_coef) * balance.weight * experts / (balance.tokens * balance.tokens * k);
  std::vector<double> dp(experts);
  for (int t = 0; t < tokens; ++t) {
    const float* p = scores + I(t) * experts;
    const float* counts = balance.counts + I(t / (tokens / balance.groups)) * experts;
    // d/dp of the aux loss (counts held constant).
    if (scoring.sigmoid) {
      const double z = score_sum(p, experts);
      double fq = 0;
      for (int e = 0; e < experts; ++e) fq += z > 0 ? double(counts[e]) * p[e] / z : 0.0;
      for (int e = 0; e < experts; ++e) dp[e] = z > 0 ? aux * (counts[e] - fq) / z : 0.0;
    } else {
      for (int e = 0; e < experts; ++e) dp[e] = aux * counts[e];
    }
    // d/dp of sum_j g_j w_j.
    if (dtopk_w != nullptr) {
      const int* idx = topk_idx + I(t) * k;
      const float* g = dtopk_w + I(t) * k;
      const float* w = topk_w + I(t) * k;
      if (scoring.normalize) {
        double picked = 0, gw = 0;
        for (int j = 0; j < k; ++j) picked += p[idx[j]], gw += double(g[j]) * w[j];
        if (picked > 0)
          for (int j = 0; j < k; ++j) dp[idx[j]] += (scoring.scaling * g[j] - gw) / picked;
      } else {
        for (int j = 0; j < k; ++j) dp[idx[j]] += scoring.scaling * g[j];
      }
    }
    // Through the scores, plus the z-loss (d lse / d l = softmax(l)).
    const double z = 2.0 * z_coef / all * lse[t];
    float* dl = dlogits + I(t) * experts;
    if (scoring.sigmoid) {
      const float* l = logits + I(t) * experts;
      for (int e = 0; e < experts; ++e)
        dl[e] = float(dp[e] * p[e] * (1.0 - p[e]) + z * std::exp(double(l[e]) - lse[t]));
    } else {
      double dot = 0;
      for (int e = 0; e < experts; ++e) dot += double(p[e]) * dp[e];
      for (int e = 0; e < experts; ++e) dl[e] = float(p[e] * (dp[e] - dot + z));
    }
  }
}

// ---- MoE permutation ----

int ReferenceBackend::moe_route_plan(int* expert_offsets, int* row_slot, int* slot_row, int*, const int* topk_idx,
                                     const float* topk_w, int tokens, int experts, int k, int capacity) {
  const int slots = tokens * k;
  auto weight = [&](int s) { return std::isnan(topk_w[s]) ? -INFINITY : topk_w[s]; };
  int kept = 0;
  for (int e = 0; e < experts; ++e) {
    expert_offsets[e] = kept;
    std::vector<int> mine;
    for (int s = 0; s < slots; ++s) {
      MOE4D_CHECK(topk_idx[s] >= 0 && topk_idx[s] < experts);
      if (topk_idx[s] == e) mine.push_back(s);
    }
    if (capacity >= 0 && int(mine.size()) > capacity) {
      // Keep the heaviest (ties: the earlier slot), then back in slot order.
      std::stable_sort(mine.begin(), mine.end(), [&](int a, int b) { return weight(a) > weight(b); });
      for (size_t i = size_t(capacity); i < mine.size(); ++i) slot_row[mine[i]] = -1;
      mine.resize(size_t(capacity));
      std::sort(mine.begin(), mine.end());
    }
    for (int s : mine) {
      row_slot[kept] = s;
      slot_row[s] = kept++;
    }
  }
  expert_offsets[experts] = kept;
  return kept;
}

void ReferenceBackend::moe_permute_forward(float* xp, const float* x, const int* row_slot, int rows, int k, int d) {
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < d; ++c) xp[I(r) * d + c] = x[I(row_slot[r] / k) * d + c];
}

void ReferenceBackend::moe_permute_backward(float* dx, const float* dxp, const int* row_slot, int rows, int k, int d) {
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < d; ++c) dx[I(row_slot[r] / k) * d + c] += dxp[I(r) * d + c];
}

void ReferenceBackend::moe_unpermute_forward(float* out, const float* y, const int* slot_row, const float* topk_w,
                                             int tokens, int k, int d) {
  for (int t = 0; t < tokens; ++t)
    for (int c = 0; c < d; ++c) {
      double acc = 0;
      for (int j = 0; j < k; ++j) {
        const int s = t * k + j;
        if (slot_row[s] >= 0) acc += double(topk_w[s]) * y[I(slot_row[s]) * d + c];
      }
      out[I(t) * d + c] = float(acc);
    }
}

void ReferenceBackend::moe_unpermute_backward(float* dy, float* dtopk_w, const float* dout, const float* y,
                                              const int* slot_row, const float* topk_w, int tokens, int k, int d) {
  for (int s = 0; s < tokens * k; ++s) {
    const int row = slot_row[s];
    const float* g = dout + I(s / k) * d;
    double dot = 0;
    for (int c = 0; c < d && row >= 0; ++c) {
      dot += double(g[c]) * y[I(row) * d + c];
      dy[I(row) * d + c] = float(double(topk_w[s]) * g[c]);
    }
    dtopk_w[s] = float(dot);
  }
}

// ---- embedding ----

void ReferenceBackend::embedding_forward(float* out, const float* table, const int* tokens, int n, int d, int v0,
                                         int vocab_local) {
  for (int t = 0; t < n; ++t) {
    const int local = tokens[t] - v0;
    const bool owned = local >= 0 && local < vocab_local;
    for (int c = 0; c < d; ++c) out[I(t) * d + c] = owned ? table[I(local) * d + c] : 0.0f;
  }
}

void ReferenceBackend::embedding_backward(float* dtable, const float* dout, const int* tokens, int n, int d, int v0,
                                          int vocab_local) {
  for (int t = 0; t < n; ++t) {
    const int local = tokens[t] - v0;
    if (local < 0 || local >= vocab_local) continue;
    for (int c = 0; c < d; ++c) dtable[I(local) * d + c] += dout[I(t) * d + c];
  }
}

// ---- cross-entropy ----

void ReferenceBackend::ce_row_max(float* m, const float* logits, int tokens, int vocab_local) {
  for (int t = 0; t < tokens; ++t) {
    float mx = -INFINITY;
    for (int v = 0; v < vocab_local; ++v) mx = std::max(mx, logits[I(t) * vocab_local + v]);
    m[t] = mx;
  }
}

void ReferenceBackend::ce_row_sumexp(float* s, const float* logits, const float* m, int tokens, int vocab_local) {
  for (int t = 0; t < tokens; ++t) {
    double acc = 0;
    for (int v = 0; v < vocab_local; ++v) acc += std::exp(double(logits[I(t) * vocab_local + v]) - m[t]);
    s[t] = float(acc);
  }
}

void ReferenceBackend::ce_target_logit(float* tl, const float* logits, const int* targets, int tokens, int vocab_local,
                                       int v0) {
  for (int t = 0; t < tokens; ++t) {
    const int local = targets[t] - v0;
    tl[t] = local >= 0 && local < vocab_local ? logits[I(t) * vocab_local + local] : 0.0f;
  }
}

void ReferenceBackend::ce_loss(float* loss, const float* m, const float* s, const float* tl, int tokens) {
  for (int t = 0; t < tokens; ++t) loss[t] = float(std::log(double(s[t])) + m[t] - tl[t]);
}

void ReferenceBackend::ce_backward(float* dlogits, const float* logits, const float* m, const float* s,
                                   const int* targets, float dloss_per_token, int tokens, int vocab_local, int v0) {
  for (int t = 0; t < tokens; ++t)
    for (int v = 0; v < vocab_local; ++v) {
      const I i = I(t) * vocab_local + v;
      const double onehot = v0 + v == targets[t] ? 1.0 : 0.0;
      dlogits[i] = float((std::exp(double(logits[i]) - m[t]) / s[t] - onehot) * dloss_per_token);
    }
}

// ---- optimizers ----

void ReferenceBackend::adamw_update(float* param, const float* grad, float* m, float* v, int64_t n,
                                    const AdamWStep& step) {
  const double t = double(step.step), b1 = step.beta1, b2 = step.beta2;
  const double bc1 = 1.0 - std::pow(b1, t), bc2 = 1.0 - std::pow(b2, t);
  for (I i = 0; i < n; ++i) {
    const double g = double(grad[i]) * step.grad_scale;
    const double mi = b1 * m[i] + (1 - b1) * g, vi = b2 * v[i] + (1 - b2) * g * g, p = param[i];
    m[i] = float(mi);
    v[i] = float(vi);
    param[i] = float(p - double(step.lr) * (mi / bc1) / (std::sqrt(vi / bc2) + step.eps) -
                     double(step.lr) * step.weight_decay * p);
  }
}

void ReferenceBackend::onebit_compress(const float* x, size_t n, size_t chunk, float* error, uint8_t* block) {
  double sq = 0;
  for (size_t i = 0; i < n; ++i) sq += double(x[i]) * x[i];
  const float scale = n > 0 ? float(std::sqrt(sq / double(n))) : 0.0f;
  std::memcpy(block, &scale, sizeof scale);
  uint8_t* bits = block + sizeof scale;
  for (size_t i = 0; i < chunk / 8; ++i) bits[i] = 0;
  for (size_t i = 0; i < n; ++i) {
    const bool positive = !(x[i] < 0.0f);
    if (positive) bits[i / 8] = uint8_t(bits[i / 8] | (1u << (i % 8)));
    error[i] = float(double(x[i]) - (positive ? scale : -scale));
  }
}

void ReferenceBackend::onebit_decompress(const uint8_t* block, size_t n, float weight, float* out, bool accumulate) {
  float scale;
  std::memcpy(&scale, block, sizeof scale);
  for (size_t i = 0; i < n; ++i) {
    const bool positive = (block[sizeof scale + i / 8] >> (i % 8)) & 1u;
    const double v = double(weight) * scale * (positive ? 1.0 : -1.0);
    out[i] = float(accumulate ? out[i] + v : v);
  }
}

void ReferenceBackend::momentum_update(float* m, const float* grad, float beta1, float coef, size_t n) {
  for (size_t i = 0; i < n; ++i) m[i] = float(double(beta1) * m[i] + double(coef) * grad[i]);
}

void ReferenceBackend::onebit_adam_update(float* param, const float* m, const float* v, size_t n, float lr,
                                          float inv_bc1, float inv_bc2, float eps, float decay) {
  for (size_t i = 0; i < n; ++i) {
    const double p = param[i];
    param[i] = float(p - double(lr) * (double(m[i]) * inv_bc1) / (std::sqrt(double(v[i]) * inv_bc2) + eps) -
                     double(decay) * p);
  }
}

}  // namespace moe4d
