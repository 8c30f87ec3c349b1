// tests/kernels/attention_test.cc — causal attention forward vs double reference, backward vs finite
// differences, over shapes that exercise seq = 1, partial row blocks, several heads/batches, and
// grouped-query (GQA) and multi-query (MQA) heads sharing KV heads.
#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernel_test_util.h"

namespace moe4d {
namespace {

struct AttnCase {
  int batch, seq, heads, head_dim;
  int kv_heads = 0;  // 0: heads (multi-head)
  int kv() const { return kv_heads > 0 ? kv_heads : heads; }
};

// Offsets in one token's row of the grouped layout [kv, g + 2, hd] (kernels/attention.h).
size_t q_offset(const AttnCase& c, int h) {
  const int g = c.heads / c.kv();
  return (static_cast<size_t>(h / g) * (g + 2) + h % g) * c.head_dim;
}
size_t k_offset(const AttnCase& c, int h) {
  const int g = c.heads / c.kv();
  return (static_cast<size_t>(h / g) * (g + 2) + g) * c.head_dim;
}

// out [batch*seq, heads*hd] (and probs [batch, heads, seq, seq] if asked), all in double.
std::vector<double> attention_reference(const std::vector<double>& qkv, const AttnCase& c,
                                        std::vector<double>* probs = nullptr) {
  const int hd = c.head_dim;
  const size_t row = static_cast<size_t>(c.heads + 2 * c.kv()) * hd;
  std::vector<double> out(static_cast<size_t>(c.batch) * c.seq * c.heads * hd, 0.0);
  if (probs) probs->assign(static_cast<size_t>(c.batch) * c.heads * c.seq * c.seq, 0.0);
  std::vector<double> s(c.seq);
  for (int b = 0; b < c.batch; ++b)
    for (int h = 0; h < c.heads; ++h)
      for (int i = 0; i < c.seq; ++i) {
        const double* q = &qkv[(static_cast<size_t>(b) * c.seq + i) * row + q_offset(c, h)];
        double m = -INFINITY;
        for (int j = 0; j <= i; ++j) {
          const double* k = &qkv[(static_cast<size_t>(b) * c.seq + j) * row + k_offset(c, h)];
          double dot = 0.0;
          for (int d = 0; d < hd; ++d) dot += q[d] * k[d];
          s[j] = dot / std::sqrt(static_cast<double>(hd));
          m = std::max(m, s[j]);
        }
        double sum = 0.0;
        for (int j = 0; j <= i; ++j) sum += (s[j] = std::exp(s[j] - m));
        double* o = &out[(static_cast<size_t>(b) * c.seq + i) * c.heads * hd + h * hd];
        for (int j = 0; j <= i; ++j) {
          const double p = s[j] / sum;
          if (probs) (*probs)[((static_cast<size_t>(b) * c.heads + h) * c.seq + i) * c.seq + j] = p;
          const double* v = &qkv[(static_cast<size_t>(b) * c.seq + j) * row + k_offset(c, h) + hd];
          for (int d = 0; d < hd; ++d) o[d] += p * v[d];
        }
      }
  return out;
}

class AttentionTest : public ::testing::TestWithParam<AttnCase> {};

TEST_P(AttentionTest, ForwardAndBackward) {
  const AttnCase c = GetParam();
  const size_t tokens = static_cast<size_t>(c.batch) * c.seq;
  const size_t qkv_n = tokens * (c.heads + 2 * c.kv()) * c.head_dim, out_n = tokens * c.heads * c.head_dim;
  const size_t probs_n = static_cast<size_t>(c.batch) * c.heads * c.seq * c.seq;
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  auto qkv = test::random_normal(qkv_n, 50, 1.2f);
  auto r = test::random_normal(out_n, 51);
  // Outputs and scratch start as NaN: the kernels must overwrite everything they promise to and never
  // read scratch they did not write.
  std::vector<float> out(out_n, kNaN), probs(probs_n, kNaN);
  attention_forward(out.data(), probs.data(), qkv.data(), c.batch, c.seq, c.heads, c.kv(), c.head_dim);
  std::vector<double> probs_ref;
  const auto qkv_d = test::to_double(qkv);
  test::expect_values_near(out.data(), attention_reference(qkv_d, c, &probs_ref), 1e-5, "attention out");
  test::expect_values_near(probs.data(), probs_ref, 1e-5, "attention probs");
  for (int bh = 0; bh < c.batch * c.heads; ++bh)
    for (int i = 0; i < c.seq; ++i)
      for (int j = i + 1; j < c.seq; ++j)
        ASSERT_EQ(probs[(static_cast<size_t>(bh) * c.seq + i) * c.seq + j], 0.0f) << "above the diagonal";

  std::vector<float> dqkv(qkv_n, kNaN), scratch(static_cast<size_t>(c.seq) * c.seq, kNaN);
  attention_backward(dqkv.data(), scratch.data(), r.data(), qkv.data(), probs.data(), c.batch, c.seq, c.heads,
                     c.kv(), c.head_dim);
  auto fd = test::fd_gradient([&](const std::vector<double>& v) { return test::dot(attention_reference(v, c), r); },
                              qkv_d, 400);
  test::expect_grad_near(dqkv.data(), fd, 2e-4, "attention dqkv");
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionTest,
                         ::testing::Values(AttnCase{1, 1, 1, 4}, AttnCase{3, 1, 2, 2}, AttnCase{2, 5, 3, 4},
                                           AttnCase{1, 64, 1, 8}, AttnCase{1, 70, 2, 8}, AttnCase{2, 130, 1, 4},
                                           // grouped-query: 2 query heads per KV head; 3 KV groups of 2
                                           AttnCase{2, 5, 4, 4, 2}, AttnCase{1, 70, 6, 4, 3},
                                           // multi-query: every query head reads the one KV head
                                           AttnCase{2, 7, 3, 4, 1}, AttnCase{1, 66, 4, 2, 1}));

}  // namespace
}  // namespace moe4d
