// tests/kernels/embedding_test.cc — (vocab-sharded) embedding lookup and its accumulating backward.
#include "kernels/embedding.h"

#include <gtest/gtest.h>

#include "kernel_test_util.h"

namespace moe4d {
namespace {

TEST(Embedding, ShardedLookupsSumToTheFullLookup) {
  const int vocab = 12, d = 5;
  const std::vector<int> tokens = {0, 11, 3, 3, 7, 4, 8, 6};  // 4, 6, 8: first ids of shards
  const int n = static_cast<int>(tokens.size());
  auto table = test::random_normal(static_cast<size_t>(vocab) * d, 110);
  std::vector<float> full(static_cast<size_t>(n) * d, -1.0f);
  embedding_forward(full.data(), table.data(), tokens.data(), n, d, 0, vocab);
  for (int t = 0; t < n; ++t)
    for (int j = 0; j < d; ++j) EXPECT_EQ(full[t * d + j], table[tokens[t] * d + j]);

  for (int shards : {2, 3}) {
    const int local = vocab / shards;
    std::vector<float> sum(full.size(), 0.0f), part(full.size(), -1.0f);
    for (int i = 0; i < shards; ++i) {
      embedding_forward(part.data(), table.data() + static_cast<size_t>(i) * local * d, tokens.data(), n, d, i * local,
                        local);
      for (size_t e = 0; e < sum.size(); ++e) sum[e] += part[e];
    }
    EXPECT_EQ(sum, full) << shards << " shards";
  }
}

TEST(Embedding, BackwardAccumulatesOwnedRowsAndMatchesFiniteDifferences) {
  const int vocab = 9, d = 4;
  const std::vector<int> tokens = {2, 5, 2, 8, 3, 2, 6};
  const int n = static_cast<int>(tokens.size());
  auto table = test::random_normal(static_cast<size_t>(vocab) * d, 111);
  auto r = test::random_normal(static_cast<size_t>(n) * d, 112);
  auto forward = [&](const std::vector<double>& tab) {
    std::vector<double> out(static_cast<size_t>(n) * d);
    for (int t = 0; t < n; ++t)
      for (int j = 0; j < d; ++j) out[t * d + j] = tab[tokens[t] * d + j];
    return out;
  };
  auto fd = test::fd_gradient([&](const std::vector<double>& v) { return test::dot(forward(v), r); },
                              test::to_double(table));
  auto dtable0 = test::random_normal(table.size(), 113);
  auto dtable = dtable0;
  embedding_backward(dtable.data(), r.data(), tokens.data(), n, d, 0, vocab);
  for (size_t i = 0; i < dtable.size(); ++i) dtable[i] -= dtable0[i];
  test::expect_grad_near(dtable.data(), fd, 1e-5, "embedding dtable");

  // Shard [3, 6) as a view into a full-size table: tokens 3 and 5 land in it, token 6 (the first id
  // past it) and the rest must leave every other row untouched.
  std::vector<float> dfull(static_cast<size_t>(vocab) * d, 0.5f);
  embedding_backward(dfull.data() + 3 * d, r.data(), tokens.data(), n, d, 3, 3);
  for (int v = 0; v < vocab; ++v)
    for (int j = 0; j < d; ++j) {
      const float expected = v == 3 ? 0.5f + r[4 * d + j] : v == 5 ? 0.5f + r[1 * d + j] : 0.5f;
      EXPECT_FLOAT_EQ(dfull[v * d + j], expected) << "row " << v;
    }
}

}  // namespace
}  // namespace moe4d
