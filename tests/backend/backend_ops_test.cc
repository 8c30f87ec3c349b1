// Cross-backend op tests (ggml's test-backend-ops): every op of the Backend interface, forward and
// backward, on several shapes (odd sizes, grouped-query heads, sequences across the CPU attention's
// causal blocks of 64 rows, router capacity drops, vocab shards), run on the CPU backend and on the
// reference backend from the same inputs, the outputs compared with the tolerance each case states:
//   exact (0)   index ops, copies, casts, sign compression: the same bits;
//   1e-5        fp32 arithmetic: |cpu - ref| <= tol * (1 + |ref|), elementwise (fp32 sums in another
//               order against fp64 sums; the GEMM's scale is the sum of |a||b| over k, see gemm_tol);
//   1/128       16-bit outputs rounded by round_c: a one-ulp bf16 (2^-8 relative) disagreement when
//               the fp32 sums straddle a rounding boundary.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu_backend.h"
#include "backend/reference_backend.h"
#include "core/error.h"
#include "kernels/onebit_kernels.h"

namespace moe4d {
namespace {

using Vec = std::vector<float>;
using Ints = std::vector<int>;
using Outputs = std::vector<Vec>;

Vec rnd(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  Vec v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

Vec as_floats(const Ints& v) { return Vec(v.begin(), v.end()); }

// Runs `op` on both backends and compares every output: |cpu - ref| <= tol * (scale + |ref|).
void compare(const std::string& what, const std::function<Outputs(Backend&)>& op, double tol, double scale = 1.0) {
  SCOPED_TRACE(what);
  CpuBackend cpu;
  ReferenceBackend ref;
  const Outputs a = op(cpu), b = op(ref);
  ASSERT_EQ(a.size(), b.size());
  for (size_t o = 0; o < a.size(); ++o) {
    ASSERT_EQ(a[o].size(), b[o].size()) << "output " << o;
    for (size_t i = 0; i < a[o].size(); ++i) {
      if (std::isnan(b[o][i])) {
        ASSERT_TRUE(std::isnan(a[o][i])) << "output " << o << " [" << i << "]";
        continue;
      }
      if (a[o][i] == b[o][i]) continue;  // also equal infinities
      ASSERT_LE(std::abs(double(a[o][i]) - b[o][i]), tol * (scale + std::abs(double(b[o][i]))))
          << "output " << o << " [" << i << "]: cpu " << a[o][i] << " reference " << b[o][i];
    }
  }
}

constexpr double kF32 = 1e-5;

TEST(BackendOps, FillZeroCopy) {
  compare(
      "memory",
      [](Backend& be) {
        Vec x(37, 5.0f), y = rnd(37, 1), z(40, 9.0f), rows(3 * 16, -1.0f);
        be.fill(x.data(), 2.5f, 30);
        be.zero(z.data() + 3, 7 * sizeof(float));
        be.copy(z.data() + 20, y.data(), 11 * sizeof(float));
        be.copy_rows(rows.data(), 16 * sizeof(float), y.data() + 1, 5 * sizeof(float), 4 * sizeof(float), 3);
        return Outputs{x, z, rows};
      },
      0);
}

// The GEMM's error scale: sum over k of |a||b| ~ k / 3 for uniform [-1, 1] operands.
double gemm_tol(int k) { return kF32 * (1 + k); }

TEST(BackendOps, Gemm) {
  struct Case {
    int m, n, k;
  };
  for (const Case c : {Case{1, 1, 1}, Case{7, 5, 3}, Case{33, 17, 65}, Case{64, 48, 100}})
    for (int t = 0; t < 4; ++t)
      for (DType type : {DType::kF32, DType::kBF16, DType::kF16})
        for (float beta : {0.0f, 1.0f}) {
          const bool ta = t & 1, tb = t & 2;
          const int lda = (ta ? c.m : c.k) + 2, ldb = (tb ? c.k : c.n) + 1, ldc = c.n + 3;
          const Vec a = rnd(size_t(ta ? c.k : c.m) * lda, 2), b = rnd(size_t(tb ? c.n : c.k) * ldb, 3);
          const Vec c0 = rnd(size_t(c.m) * ldc, 4);
          for (bool round_c : {false, true}) {
            if (round_c && type == DType::kF32) continue;
            compare(
                fmt::format("gemm {}x{}x{} ta {} tb {} {} beta {} round {}", c.m, c.n, c.k, ta, tb, dtype_name(type),
                            beta, round_c),
                [&](Backend& be) {
                  Vec out = c0;
                  be.gemm(type, ta, tb, c.m, c.n, c.k, 0.75f, a.data(), lda, b.data(), ldb, beta, out.data(), ldc,
                          round_c);
                  return Outputs{out};
                },
                round_c ? 1.0 / 128 : kF32, round_c ? 1.0 : 1.0 + c.k);
          }
        }
  (void)gemm_tol;
}

TEST(BackendOps, GroupedGemm) {
  const int groups = 4, n = 9, k = 13;
  const Ints offsets = {0, 5, 5, 12, 20};  // group 1 has no rows
  const Vec a = rnd(size_t(20) * k, 5), b = rnd(size_t(groups) * k * n, 6);
  for (bool tb : {false, true})
    for (DType type : {DType::kF32, DType::kBF16})
      compare(
          fmt::format("grouped_gemm tb {} {}", tb, dtype_name(type)),
          [&](Backend& be) {
            Vec c = rnd(size_t(20) * n, 7);
            be.grouped_gemm(type, tb, groups, offsets.data(), n, k, 1.0f, a.data(), k, b.data(), int64_t(k) * n,
                            tb ? k : n, 1.0f, c.data(), n, false);
            return Outputs{c};
          },
          kF32, 1.0 + k);
}

TEST(BackendOps, Casts) {
  Vec x = rnd(301, 8, -70000.0f, 70000.0f);
  x[0] = 1e-30f, x[1] = -0.0f, x[2] = INFINITY, x[3] = NAN, x[4] = 65519.0f, x[5] = 65520.0f, x[6] = 3.0e-8f;
  for (DType type : {DType::kF32, DType::kBF16, DType::kF16})
    compare(
        fmt::format("casts {}", dtype_name(type)),
        [&](Backend& be) {
          Vec r(x.size());
          be.round_to(type, x.data(), r.data(), int64_t(x.size()));
          Outputs out{r};
          if (type != DType::kF32) {
            std::vector<uint16_t> h(x.size());
            be.to_half(type, x.data(), h.data(), int64_t(x.size()));
            Vec back(x.size());
            be.from_half(type, h.data(), back.data(), int64_t(x.size()));
            out.push_back(Vec(h.begin(), h.end()));
            out.push_back(back);
          }
          return out;
        },
        0);
}

TEST(BackendOps, ElementwiseAndReductions) {
  for (int64_t n : {1, 15, 16, 1000}) {
    const Vec x = rnd(size_t(n), 9);
    compare(
        fmt::format("elementwise n {}", n),
        [&](Backend& be) {
          Vec y = rnd(size_t(n), 10), z = x;
          be.axpy(y.data(), x.data(), -0.3f, n);
          be.scale(z.data(), 1.7f, n);
          Vec bad = x;
          bad[size_t(n) / 2] = INFINITY;
          return Outputs{y,
                         z,
                         {float(be.sum_squares(x.data(), n))},
                         {float(be.all_finite(x.data(), n)), float(be.all_finite(bad.data(), n))}};
        },
        kF32);
  }
}

TEST(BackendOps, RmsNorm) {
  for (auto [n, d] : {std::pair{1, 1}, {5, 7}, {16, 64}}) {
    const Vec x = rnd(size_t(n) * d, 11), w = rnd(size_t(d), 12, 0.5f, 1.5f), dout = rnd(size_t(n) * d, 13);
    compare(
        fmt::format("rmsnorm {}x{}", n, d),
        [&](Backend& be) {
          Vec out(x.size()), rstd(static_cast<size_t>(n)), dx = rnd(x.size(), 14), dw = rnd(size_t(d), 15);
          be.rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), n, d, 1e-5f);
          be.rmsnorm_backward(dx.data(), dw.data(), dout.data(), x.data(), w.data(), rstd.data(), n, d);
          return Outputs{out, rstd, dx, dw};
        },
        kF32, 1.0 + d / 8.0);
  }
}

struct HeadCase {
  int batch, seq, heads, kv_heads, head_dim;
};
const HeadCase kHeadCases[] = {{2, 5, 4, 2, 8}, {1, 130, 2, 1, 16}, {1, 64, 3, 3, 4}, {3, 1, 2, 2, 2}};

TEST(BackendOps, Rope) {
  for (const HeadCase c : kHeadCases) {
    const RopeTable table(c.seq, c.head_dim, 10000.0f);
    const size_t n = size_t(c.batch) * c.seq * (c.heads + 2 * c.kv_heads) * c.head_dim;
    const Vec x = rnd(n, 16);
    compare(
        fmt::format("rope b{} s{} h{} kv{} hd{}", c.batch, c.seq, c.heads, c.kv_heads, c.head_dim),
        [&](Backend& be) {
          Vec f = x, g = x;
          be.rope_forward(f.data(), table, c.batch, c.heads, c.kv_heads);
          be.rope_backward(g.data(), table, c.batch, c.heads, c.kv_heads);
          return Outputs{f, g};
        },
        kF32);
  }
}

TEST(BackendOps, Attention) {
  for (const HeadCase c : kHeadCases) {
    const size_t tokens = size_t(c.batch) * c.seq;
    const Vec qkv = rnd(tokens * (c.heads + 2 * c.kv_heads) * c.head_dim, 17, -2.0f, 2.0f);
    const Vec dout = rnd(tokens * c.heads * c.head_dim, 18);
    compare(
        fmt::format("attention b{} s{} h{} kv{} hd{}", c.batch, c.seq, c.heads, c.kv_heads, c.head_dim),
        [&](Backend& be) {
          Vec out(tokens * c.heads * c.head_dim, NAN), probs(size_t(c.batch) * c.heads * c.seq * c.seq, NAN);
          Vec dqkv(qkv.size(), NAN), scratch(size_t(c.seq) * c.seq, NAN);
          be.attention_forward(out.data(), probs.data(), qkv.data(), c.batch, c.seq, c.heads, c.kv_heads, c.head_dim);
          be.attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), probs.data(), c.batch, c.seq,
                                c.heads, c.kv_heads, c.head_dim);
          return Outputs{out, probs, dqkv};
        },
        kF32, 1.0 + c.head_dim / 4.0);
  }
}

// Decoding: `tokens` new tokens after `start` cached ones (a prompt, then one token at a time).
struct DecodeCase {
  int start, tokens, heads, kv_heads, head_dim;
};
const DecodeCase kDecodeCases[] = {{0, 5, 4, 2, 8}, {7, 1, 4, 2, 8}, {129, 1, 2, 1, 16}, {3, 2, 3, 3, 4}};

TEST(BackendOps, RopeAt) {
  for (const DecodeCase c : kDecodeCases) {
    const RopeTable table(c.start + c.tokens + 1, c.head_dim, 10000.0f);
    const Vec x = rnd(size_t(c.tokens) * (c.heads + 2 * c.kv_heads) * c.head_dim, 22);
    compare(
        fmt::format("rope at {} tokens {} h{} kv{} hd{}", c.start, c.tokens, c.heads, c.kv_heads, c.head_dim),
        [&](Backend& be) {
          Vec f = x;
          be.rope_forward_at(f.data(), table, c.start, c.tokens, c.heads, c.kv_heads);
          return Outputs{f};
        },
        kF32);
  }
}

TEST(BackendOps, AttentionDecode) {
  for (const DecodeCase c : kDecodeCases) {
    const int positions = c.start + c.tokens;
    const Vec qkv = rnd(size_t(c.tokens) * (c.heads + 2 * c.kv_heads) * c.head_dim, 23, -2.0f, 2.0f);
    const Vec keys = rnd(size_t(positions) * c.kv_heads * c.head_dim, 24, -2.0f, 2.0f);
    const Vec values = rnd(keys.size(), 25);
    compare(
        fmt::format("attention decode at {} tokens {} h{} kv{} hd{}", c.start, c.tokens, c.heads, c.kv_heads,
                    c.head_dim),
        [&](Backend& be) {
          Vec out(size_t(c.tokens) * c.heads * c.head_dim, NAN), scores(size_t(positions), NAN);
          be.attention_decode(out.data(), scores.data(), qkv.data(), keys.data(), values.data(), c.tokens, c.start,
                              c.heads, c.kv_heads, c.head_dim);
          return Outputs{out};
        },
        kF32, 1.0 + c.head_dim / 4.0);
  }
}

TEST(BackendOps, SwiGlu) {
  for (int64_t n : {1, 17, 1024}) {
    const Vec a = rnd(size_t(n), 19, -4.0f, 4.0f), b = rnd(size_t(n), 20), dg = rnd(size_t(n), 21);
    compare(
        fmt::format("swiglu n {}", n),
        [&](Backend& be) {
          Vec g(static_cast<size_t>(n)), da(static_cast<size_t>(n)), db(static_cast<size_t>(n));
          be.swiglu_forward(g.data(), a.data(), b.data(), n);
          be.swiglu_backward(da.data(), db.data(), dg.data(), a.data(), b.data(), n);
          return Outputs{g, da, db};
        },
        kF32);
  }
}

TEST(BackendOps, Router) {
  struct Case {
    int tokens, experts, k;
    bool sigmoid, normalize, bias;
    int total;
    int groups = 1, group_topk = 1;
    float scaling = 1.0f;
  };
  for (const Case c : {Case{13, 8, 2, false, true, false, 0}, Case{13, 8, 2, true, true, true, 0},
                       Case{9, 5, 1, false, false, false, 0}, Case{7, 6, 3, true, false, true, 21},
                       Case{1, 3, 3, false, true, false, 0}, Case{13, 8, 3, true, true, true, 0, 4, 2, 2.5f},
                       Case{11, 12, 4, false, false, true, 22, 3, 2, 0.7f}}) {
    const RouterScoring scoring{.sigmoid = c.sigmoid,
                                .normalize = c.normalize,
                                .groups = c.groups,
                                .group_topk = c.group_topk,
                                .scaling = c.scaling};
    const Vec logits = rnd(size_t(c.tokens) * c.experts, 22, -3.0f, 3.0f);
    const Vec bias = rnd(size_t(c.experts), 23, -0.2f, 0.2f), dtopk = rnd(size_t(c.tokens) * c.k, 24);
    compare(
        fmt::format("router t{} e{} k{} sigmoid {} normalize {} bias {} total {} groups {}/{} scaling {}", c.tokens,
                    c.experts, c.k, c.sigmoid, c.normalize, c.bias, c.total, c.group_topk, c.groups, c.scaling),
        [&](Backend& be) {
          Vec scores(logits.size()), lse(size_t(c.tokens)), w(size_t(c.tokens) * c.k);
          Ints idx(size_t(c.tokens) * c.k), counts(size_t(c.experts));
          be.router_forward(scores.data(), lse.data(), idx.data(), w.data(), logits.data(),
                            c.bias ? bias.data() : nullptr, c.tokens, c.experts, c.k, scoring);
          be.router_expert_counts(counts.data(), idx.data(), c.tokens, c.experts, c.k);
          const Vec fcounts(counts.begin(), counts.end());
          const RouterBalance balance = micro_batch_balance(fcounts.data(), c.total > 0 ? c.total : c.tokens);
          const float aux = be.router_aux_loss(scores.data(), balance, c.tokens, c.experts, c.k, scoring);
          const float z = be.router_z_loss(lse.data(), c.tokens, c.total);
          Vec dl(logits.size()), dl_no_upstream(logits.size());
          be.router_backward(dl.data(), dtopk.data(), scores.data(), lse.data(), idx.data(), w.data(), balance,
                             c.tokens, c.experts, c.k, 0.01f, 0.001f, scoring, logits.data(), c.total);
          be.router_backward(dl_no_upstream.data(), nullptr, scores.data(), lse.data(), idx.data(), w.data(),
                             balance, c.tokens, c.experts, c.k, 0.01f, 0.001f, scoring, logits.data(), c.total);
          return Outputs{scores, lse, as_floats(idx), w, as_floats(counts), {aux, z}, dl, dl_no_upstream};
        },
        kF32);
  }
}

TEST(BackendOps, MoePermutation) {
  const int tokens = 11, experts = 4, k = 2, d = 5;
  std::mt19937 gen(25);
  Ints idx(size_t(tokens) * k);
  for (int t = 0; t < tokens; ++t) {
    idx[size_t(t) * k] = int(gen() % experts);
    idx[size_t(t) * k + 1] = (idx[size_t(t) * k] + 1 + int(gen() % (experts - 1))) % experts;
  }
  Vec w = rnd(idx.size(), 26, 0.0f, 1.0f);
  w[3] = w[8];  // a tie for the capacity drop order
  const Vec x = rnd(size_t(tokens) * d, 27), dout = rnd(size_t(tokens) * d, 28);
  for (int capacity : {-1, 7, 3, 0}) {
    compare(
        fmt::format("moe permutation capacity {}", capacity),
        [&](Backend& be) {
          Ints offsets(experts + 1), row_slot(idx.size(), -7), slot_row(idx.size(), -7), scratch(idx.size());
          const int rows = be.moe_route_plan(offsets.data(), row_slot.data(), slot_row.data(), scratch.data(),
                                             idx.data(), w.data(), tokens, experts, k, capacity);
          row_slot.resize(static_cast<size_t>(rows));
          Vec xp(size_t(rows) * d), y = rnd(size_t(rows) * d, 29), out(size_t(tokens) * d);
          be.moe_permute_forward(xp.data(), x.data(), row_slot.data(), rows, k, d);
          be.moe_unpermute_forward(out.data(), y.data(), slot_row.data(), w.data(), tokens, k, d);
          Vec dy(size_t(rows) * d, 0.0f), dw(idx.size()), dx = rnd(size_t(tokens) * d, 30);
          be.moe_unpermute_backward(dy.data(), dw.data(), dout.data(), y.data(), slot_row.data(), w.data(), tokens, k,
                                    d);
          be.moe_permute_backward(dx.data(), dy.data(), row_slot.data(), rows, k, d);
          return Outputs{
              {float(rows)}, as_floats(offsets), as_floats(row_slot), as_floats(slot_row), xp, out, dy, dw, dx};
        },
        kF32);
  }
}

TEST(BackendOps, Embedding) {
  const int n = 9, d = 6, vocab = 20;
  Ints tokens = {0, 19, 7, 7, 12, 3, 10, 9, 15};
  const Vec table = rnd(size_t(vocab) * d, 31), dout = rnd(size_t(n) * d, 32);
  for (auto [v0, local] : {std::pair{0, 20}, {0, 10}, {10, 10}, {7, 6}})
    compare(
        fmt::format("embedding shard [{}, {})", v0, v0 + local),
        [&](Backend& be) {
          Vec out(size_t(n) * d, NAN), dtable = rnd(size_t(local) * d, 33);
          be.embedding_forward(out.data(), table.data() + size_t(v0) * d, tokens.data(), n, d, v0, local);
          be.embedding_backward(dtable.data(), dout.data(), tokens.data(), n, d, v0, local);
          return Outputs{out, dtable};
        },
        kF32);
}

TEST(BackendOps, CrossEntropy) {
  const int tokens = 7, vocab = 37;
  const Ints targets = {0, 36, 5, 18, 19, 30, 2};
  const Vec logits = rnd(size_t(tokens) * vocab, 34, -5.0f, 5.0f);
  for (auto [v0, local] : {std::pair{0, 37}, {0, 19}, {19, 18}})
    compare(
        fmt::format("cross-entropy shard [{}, {})", v0, v0 + local),
        [&](Backend& be) {
          Vec shard(size_t(tokens) * local);
          for (int t = 0; t < tokens; ++t)
            for (int v = 0; v < local; ++v) shard[size_t(t) * local + v] = logits[size_t(t) * vocab + v0 + v];
          Vec m(tokens), s(tokens), tl(tokens), loss(tokens), dl(shard.size());
          be.ce_row_max(m.data(), shard.data(), tokens, local);
          be.ce_row_sumexp(s.data(), shard.data(), m.data(), tokens, local);
          be.ce_target_logit(tl.data(), shard.data(), targets.data(), tokens, local, v0);
          be.ce_loss(loss.data(), m.data(), s.data(), tl.data(), tokens);
          be.ce_backward(dl.data(), shard.data(), m.data(), s.data(), targets.data(), 0.125f, tokens, local, v0);
          Vec in_place = shard;  // dlogits aliasing logits
          be.ce_backward(in_place.data(), in_place.data(), m.data(), s.data(), targets.data(), 0.125f, tokens, local,
                         v0);
          return Outputs{m, s, tl, loss, dl, in_place};
        },
        kF32);
}

TEST(BackendOps, Optimizers) {
  for (int64_t n : {1, 33, 200}) {
    const Vec grad = rnd(size_t(n), 35);
    compare(
        fmt::format("adamw n {}", n),
        [&](Backend& be) {
          Vec p = rnd(size_t(n), 36), m = rnd(size_t(n), 37, -0.1f, 0.1f), v = rnd(size_t(n), 38, 0.0f, 0.01f);
          for (int64_t step = 1; step <= 3; ++step)
            be.adamw_update(p.data(), grad.data(), m.data(), v.data(), n,
                            {.lr = 1e-3f, .weight_decay = 0.1f, .grad_scale = 0.5f, .step = step});
          return Outputs{p, m, v};
        },
        kF32);
    compare(
        fmt::format("1-bit adam n {}", n),
        [&](Backend& be) {
          const size_t chunk = (size_t(n) + 7) / 8 * 8;
          Vec error(static_cast<size_t>(n)), out(static_cast<size_t>(n)), acc = rnd(size_t(n), 39);
          std::vector<uint8_t> block(onebit_block_bytes(chunk));
          be.onebit_compress(grad.data(), size_t(n), chunk, error.data(), block.data());
          be.onebit_decompress(block.data(), size_t(n), 0.5f, out.data(), false);
          be.onebit_decompress(block.data(), size_t(n), 0.25f, acc.data(), true);
          Vec m = rnd(size_t(n), 40), p = rnd(size_t(n), 41);
          const Vec v = rnd(size_t(n), 42, 0.0f, 0.01f);
          be.momentum_update(m.data(), grad.data(), 0.9f, 0.05f, size_t(n));
          be.onebit_adam_update(p.data(), m.data(), v.data(), size_t(n), 1e-3f, 1.1f, 1.3f, 1e-8f, 1e-4f);
          return Outputs{Vec(block.begin(), block.end()), error, out, acc, m, p};
        },
        kF32);
  }
}

// A backend that implements nothing: every op fails with one line naming the backend and the op.
class EmptyBackend final : public Backend {
 public:
  const char* name() const override { return "empty"; }
  Device device() const override { return kHostDevice; }
  Allocator& allocator() override { return host_allocator(); }
};

TEST(BackendOps, UnsupportedOpNamesBackendAndOp) {
  EmptyBackend empty;
  float x = 1;
  try {
    empty.swiglu_forward(&x, &x, &x, 1);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "backend 'empty' has no op 'swiglu_forward'");
  }
  EXPECT_THROW(empty.gemm(DType::kF32, false, false, 1, 1, 1, 1, &x, 1, &x, 1, 0, &x, 1, false), Error);
  empty.synchronize();  // queues: a no-op by default
  empty.set_queue({3});
  EXPECT_EQ(empty.queue().id, 3);
}

}  // namespace
}  // namespace moe4d
