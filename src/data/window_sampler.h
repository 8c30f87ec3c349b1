// data/window_sampler.h — which tokens each training and validation sequence sees.
//
// Pure functions of their arguments, no state: the window of global sequence `sequence_index`
// (0..global_batch-1) of optimizer step `step` depends only on (seed, step, sequence_index), so
//   * every parallel layout sees the same data: a data-parallel replica simply fills its own
//     contiguous range of sequence indices (fill_batch with first_sequence = its offset);
//   * a resumed run needs only the step number to continue with exactly the same batches.
// Windows: start = hash_combine(hash_combine(seed, step), sequence_index) mod (num_tokens - seq_len),
// inputs = tokens[start, start + seq_len), targets = tokens[start + 1, start + seq_len + 1).
// Windows may cross document boundaries; the end-of-sequence ids between documents stay in.
//
// Output rows are int32 ids, seq_len per sequence, row-major [count, seq_len]. A dataset shorter
// than seq_len + 1 tokens, or seq_len < 1, is a moe4d::Error naming the shard. Thread-safe.
// Every function takes any TokenSource (moe4d or Megatron shards, numbered shards); the
// TokenDataset overloads view one shard as a source.
#pragma once

#include <cstdint>

#include "data/token_dataset.h"
#include "data/token_source.h"

namespace moe4d {

// First token of the training window (seed, step, sequence_index); in [0, num_tokens - seq_len).
int64_t training_window_offset(int64_t num_tokens, uint64_t seed, int64_t step, int64_t sequence_index, int seq_len);

void sample_training_window(const TokenSource& dataset, uint64_t seed, int64_t step, int64_t sequence_index,
                            int seq_len, int32_t* inputs, int32_t* targets);

// Sequences first_sequence .. first_sequence + count - 1 of `step`; inputs/targets are [count, seq_len].
void fill_batch(const TokenSource& dataset, uint64_t seed, int64_t step, int64_t first_sequence, int64_t count,
                int seq_len, int32_t* inputs, int32_t* targets);

// Validation uses `num_windows` fixed windows spread evenly over the whole shard (first at 0, last
// ending at the shard's end), so a small evaluation budget still covers the entire split and the
// result does not depend on the step, the seed or the layout. Window `index` starts at
// floor(index * (num_tokens - seq_len - 1) / (num_windows - 1)). Windows overlap only when
// num_windows > max_eval_windows(). index must be in [0, num_windows) (CHECK).
int64_t eval_window_offset(int64_t num_tokens, int64_t index, int64_t num_windows, int seq_len);
void sample_eval_window(const TokenSource& dataset, int64_t index, int64_t num_windows, int seq_len, int32_t* inputs,
                        int32_t* targets);
// How many non-overlapping windows of seq_len (+1 target) the shard holds: (num_tokens - 1) / seq_len.
int64_t max_eval_windows(const TokenSource& dataset, int seq_len);

inline void sample_training_window(const TokenDataset& dataset, uint64_t seed, int64_t step, int64_t sequence_index,
                                   int seq_len, int32_t* inputs, int32_t* targets) {
  sample_training_window(TokenDatasetView(dataset), seed, step, sequence_index, seq_len, inputs, targets);
}
inline void fill_batch(const TokenDataset& dataset, uint64_t seed, int64_t step, int64_t first_sequence, int64_t count,
                       int seq_len, int32_t* inputs, int32_t* targets) {
  fill_batch(TokenDatasetView(dataset), seed, step, first_sequence, count, seq_len, inputs, targets);
}
inline void sample_eval_window(const TokenDataset& dataset, int64_t index, int64_t num_windows, int seq_len,
                               int32_t* inputs, int32_t* targets) {
  sample_eval_window(TokenDatasetView(dataset), index, num_windows, seq_len, inputs, targets);
}
inline int64_t max_eval_windows(const TokenDataset& dataset, int seq_len) {
  return max_eval_windows(TokenDatasetView(dataset), seq_len);
}

}  // namespace moe4d
