// tests/kernels/cross_entropy_test.cc — cross-entropy pieces: unsharded vs double reference, 2- and
// 3-way vocab-sharded partials (combined as the TP all-reduces would) vs unsharded, and the loss
// gradient vs finite differences.
#include "kernels/cross_entropy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "kernel_test_util.h"

namespace moe4d {
namespace {

std::vector<double> ce_reference(const std::vector<double>& logits, const std::vector<int>& targets, int vocab) {
  std::vector<double> loss;
  for (size_t t = 0; t < targets.size(); ++t) {
    const double* l = &logits[t * vocab];
    const double m = *std::max_element(l, l + vocab);
    double s = 0.0;
    for (int v = 0; v < vocab; ++v) s += std::exp(l[v] - m);
    loss.push_back(std::log(s) + m - l[targets[t]]);
  }
  return loss;
}

struct Sharded {
  std::vector<float> loss, dlogits;  // dlogits re-assembled to [tokens, vocab]
};

// Runs the kernels over shards of the given widths, combining the partials as max / sum / sum.
Sharded run_sharded(const std::vector<float>& logits, const std::vector<int>& targets, int vocab,
                    const std::vector<int>& widths, float dloss) {
  const int tokens = static_cast<int>(targets.size());
  std::vector<std::vector<float>> shards;
  for (size_t i = 0, v0 = 0; i < widths.size(); v0 += widths[i], ++i) {
    std::vector<float> shard(static_cast<size_t>(tokens) * widths[i]);
    for (int t = 0; t < tokens; ++t)
      std::copy_n(&logits[t * vocab + v0], widths[i], &shard[static_cast<size_t>(t) * widths[i]]);
    shards.push_back(std::move(shard));
  }
  std::vector<float> m(tokens, -INFINITY), s(tokens, 0.0f), tl(tokens, 0.0f), part(tokens);
  for (size_t i = 0; i < shards.size(); ++i) {
    ce_row_max(part.data(), shards[i].data(), tokens, widths[i]);
    for (int t = 0; t < tokens; ++t) m[t] = std::max(m[t], part[t]);
  }
  for (size_t i = 0, v0 = 0; i < shards.size(); v0 += widths[i], ++i) {
    ce_row_sumexp(part.data(), shards[i].data(), m.data(), tokens, widths[i]);
    for (int t = 0; t < tokens; ++t) s[t] += part[t];
    ce_target_logit(part.data(), shards[i].data(), targets.data(), tokens, widths[i], static_cast<int>(v0));
    for (int t = 0; t < tokens; ++t) tl[t] += part[t];
  }
  Sharded out;
  out.loss.resize(tokens);
  ce_loss(out.loss.data(), m.data(), s.data(), tl.data(), tokens);
  out.dlogits.resize(logits.size());
  for (size_t i = 0, v0 = 0; i < shards.size(); v0 += widths[i], ++i) {
    // In place, as the model runs it.
    ce_backward(shards[i].data(), shards[i].data(), m.data(), s.data(), targets.data(), dloss, tokens, widths[i],
                static_cast<int>(v0));
    for (int t = 0; t < tokens; ++t)
      std::copy_n(&shards[i][static_cast<size_t>(t) * widths[i]], widths[i], &out.dlogits[t * vocab + v0]);
  }
  return out;
}

TEST(CrossEntropy, UnshardedMatchesReferenceAndFiniteDifferences) {
  const int tokens = 6, vocab = 37;
  auto logits = test::random_normal(static_cast<size_t>(tokens) * vocab, 100, 3.0f);
  for (int v = 0; v < vocab; ++v) logits[vocab + v] += 80.0f;  // a row far from 0: needs the max shift
  const std::vector<int> targets = {0, 36, 5, 17, 17, 30};
  const float dloss = 1.0f / tokens;
  const Sharded full = run_sharded(logits, targets, vocab, {vocab}, dloss);
  const auto logits_d = test::to_double(logits);
  test::expect_values_near(full.loss.data(), ce_reference(logits_d, targets, vocab), 1e-6, "ce loss");

  auto fd = test::fd_gradient(
      [&](const std::vector<double>& v) {
        double sum = 0.0;
        for (double l : ce_reference(v, targets, vocab)) sum += l;
        return sum * dloss;
      },
      logits_d);
  test::expect_grad_near(full.dlogits.data(), fd, 1e-4, "ce dlogits");

  // Out of place gives the same gradient as in place.
  std::vector<float> m(tokens), s(tokens), dl(logits.size());
  ce_row_max(m.data(), logits.data(), tokens, vocab);
  ce_row_sumexp(s.data(), logits.data(), m.data(), tokens, vocab);
  ce_backward(dl.data(), logits.data(), m.data(), s.data(), targets.data(), dloss, tokens, vocab, 0);
  EXPECT_EQ(dl, full.dlogits);
}

TEST(CrossEntropy, VocabShardedPartialsEqualUnsharded) {
  const int tokens = 9, vocab = 48;
  auto logits = test::random_normal(static_cast<size_t>(tokens) * vocab, 101, 2.0f);
  std::vector<int> targets;
  for (int t = 0; t < tokens; ++t) targets.push_back((t * 13 + 5) % vocab);
  targets[0] = 0;          // first id of the first shard
  targets[1] = vocab - 1;  // last id of the last shard
  targets[2] = 24;         // first id of the second half
  const float dloss = 0.25f;
  const Sharded full = run_sharded(logits, targets, vocab, {vocab}, dloss);
  for (const std::vector<int>& widths :
       {std::vector<int>{24, 24}, std::vector<int>{16, 16, 16}, std::vector<int>{5, 30, 13}}) {
    const Sharded sharded = run_sharded(logits, targets, vocab, widths, dloss);
    for (int t = 0; t < tokens; ++t)
      EXPECT_NEAR(sharded.loss[t], full.loss[t], 2e-6 * (1.0 + full.loss[t])) << widths.size() << "-way, token " << t;
    for (size_t i = 0; i < logits.size(); ++i)
      EXPECT_NEAR(sharded.dlogits[i], full.dlogits[i], 1e-7) << widths.size() << "-way, element " << i;
  }
}

}  // namespace
}  // namespace moe4d
