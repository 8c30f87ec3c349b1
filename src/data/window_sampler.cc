// data/window_sampler.cc — deterministic training and validation windows over a token shard.
#include "data/window_sampler.h"

#include <vector>

#include "core/check.h"
#include "core/error.h"
#include "core/rng.h"

namespace moe4d {
namespace {

void check_window_fits(const TokenSource& dataset, int seq_len) {
  if (seq_len < 1) fail("sequence length {} for token shard {} must be >= 1", seq_len, dataset.name());
  if (dataset.num_tokens() < static_cast<int64_t>(seq_len) + 1)
    fail("token shard {} has {} tokens, fewer than seq_length + 1 = {} needed for one window", dataset.name(),
         dataset.num_tokens(), static_cast<int64_t>(seq_len) + 1);
}

// Both rows come from one read of seq_len + 1 ids: targets are inputs shifted by one.
void copy_window(const TokenSource& dataset, int64_t start, int seq_len, int32_t* inputs, int32_t* targets,
                 std::vector<int32_t>& scratch) {
  scratch.resize(static_cast<size_t>(seq_len) + 1);
  dataset.read(start, seq_len + 1, scratch.data());
  std::copy(scratch.begin(), scratch.end() - 1, inputs);
  std::copy(scratch.begin() + 1, scratch.end(), targets);
}

}  // namespace

int64_t training_window_offset(int64_t num_tokens, uint64_t seed, int64_t step, int64_t sequence_index, int seq_len) {
  MOE4D_CHECK_GT(num_tokens, static_cast<int64_t>(seq_len));
  uint64_t h = hash_combine(hash_combine(seed, static_cast<uint64_t>(step)), static_cast<uint64_t>(sequence_index));
  return static_cast<int64_t>(h % static_cast<uint64_t>(num_tokens - seq_len));
}

void sample_training_window(const TokenSource& dataset, uint64_t seed, int64_t step, int64_t sequence_index,
                            int seq_len, int32_t* inputs, int32_t* targets) {
  fill_batch(dataset, seed, step, sequence_index, 1, seq_len, inputs, targets);
}

void fill_batch(const TokenSource& dataset, uint64_t seed, int64_t step, int64_t first_sequence, int64_t count,
                int seq_len, int32_t* inputs, int32_t* targets) {
  check_window_fits(dataset, seq_len);
  std::vector<int32_t> scratch;
  for (int64_t i = 0; i < count; ++i) {
    int64_t start = training_window_offset(dataset.num_tokens(), seed, step, first_sequence + i, seq_len);
    copy_window(dataset, start, seq_len, inputs + i * seq_len, targets + i * seq_len, scratch);
  }
}

int64_t eval_window_offset(int64_t num_tokens, int64_t index, int64_t num_windows, int seq_len) {
  MOE4D_CHECK_GT(num_tokens, static_cast<int64_t>(seq_len));
  MOE4D_CHECK(index >= 0 && index < num_windows);
  if (num_windows == 1) return 0;
  const auto last_start = static_cast<unsigned __int128>(num_tokens - seq_len - 1);
  return static_cast<int64_t>(last_start * static_cast<uint64_t>(index) / static_cast<uint64_t>(num_windows - 1));
}

void sample_eval_window(const TokenSource& dataset, int64_t index, int64_t num_windows, int seq_len, int32_t* inputs,
                        int32_t* targets) {
  check_window_fits(dataset, seq_len);
  std::vector<int32_t> scratch;
  copy_window(dataset, eval_window_offset(dataset.num_tokens(), index, num_windows, seq_len), seq_len, inputs, targets,
              scratch);
}

int64_t max_eval_windows(const TokenSource& dataset, int seq_len) {
  check_window_fits(dataset, seq_len);
  return (dataset.num_tokens() - 1) / seq_len;
}

}  // namespace moe4d
