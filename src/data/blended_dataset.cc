// data/blended_dataset.cc — weighted, stateless choice of the source of every training sequence.
#include "data/blended_dataset.h"

#include <cmath>

#include "core/check.h"
#include "core/error.h"
#include "core/rng.h"
#include "data/window_sampler.h"

namespace moe4d {
namespace {
constexpr uint64_t kGoldenRatio64 = 0x9E3779B97F4A7C15ull;  // frac(phi) * 2^64
}  // namespace

BlendedDataset::BlendedDataset(std::vector<BlendSource> sources, int64_t global_batch_size, int seq_len)
    : sources_(std::move(sources)), global_batch_size_(global_batch_size), seq_len_(seq_len) {
  if (sources_.empty()) fail("data.train lists no sources (expected at least one path)");
  MOE4D_CHECK_GT(global_batch_size, 0);
  double total = 0;
  for (const BlendSource& s : sources_) {
    if (!(s.weight > 0) || !std::isfinite(s.weight))
      fail("data.train source {} has weight {}, expected a positive number", s.label, s.weight);
    if (s.tokens->num_tokens() < int64_t(seq_len) + 1)
      fail("data.train source {} ({}) has {} tokens, fewer than seq_length + 1 = {} needed for one window", s.label,
           s.tokens->name(), s.tokens->num_tokens(), int64_t(seq_len) + 1);
    total += s.weight;
  }
  double edge = 0;
  for (const BlendSource& s : sources_) {
    weights_.push_back(s.weight / total);
    edge += s.weight / total;
    cumulative_.push_back(edge);
  }
  cumulative_.back() = 1.0;  // rounding must not leave a gap at the top
}

int BlendedDataset::source_of(uint64_t seed, int64_t step, int64_t sequence_index) const {
  if (sources_.size() == 1) return 0;
  const uint64_t n = static_cast<uint64_t>(step) * static_cast<uint64_t>(global_batch_size_) +
                     static_cast<uint64_t>(sequence_index);
  const uint64_t origin = hash_combine(seed, hash_string("blend origin"));
  const double u = uniform_from_bits(origin + n * kGoldenRatio64);
  for (size_t k = 0; k + 1 < cumulative_.size(); ++k)
    if (u < cumulative_[k]) return static_cast<int>(k);
  return static_cast<int>(cumulative_.size() - 1);
}

void BlendedDataset::fill_batch(uint64_t seed, int64_t step, int64_t first_sequence, int64_t count, int32_t* inputs,
                                int32_t* targets) const {
  if (sources_.size() == 1) {
    moe4d::fill_batch(*sources_[0].tokens, seed, step, first_sequence, count, seq_len_, inputs, targets);
    return;
  }
  for (int64_t i = 0; i < count; ++i) {
    const int64_t sequence = first_sequence + i;
    const int k = source_of(seed, step, sequence);
    // Each source has its own window seed, so two sources of equal length do not share offsets.
    const uint64_t source_seed = hash_combine(seed, hash_string("blend source") + uint64_t(k));
    const TokenSource& tokens = *sources_[size_t(k)].tokens;
    const int64_t start = training_window_offset(tokens.num_tokens(), source_seed, step, sequence, seq_len_);
    std::vector<int32_t> window(size_t(seq_len_) + 1);
    tokens.read(start, seq_len_ + 1, window.data());
    std::copy(window.begin(), window.end() - 1, inputs + i * seq_len_);
    std::copy(window.begin() + 1, window.end(), targets + i * seq_len_);
  }
}

std::vector<int64_t> BlendedDataset::sequences_per_source(uint64_t seed, int64_t step) const {
  std::vector<int64_t> counts(sources_.size(), 0);
  for (int64_t s = 0; s < global_batch_size_; ++s) ++counts[size_t(source_of(seed, step, s))];
  return counts;
}

}  // namespace moe4d
