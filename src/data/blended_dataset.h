// data/blended_dataset.h — training sequences drawn from several token sources by weight
// (Megatron's `--data-path 0.7 a 0.3 b`).
//
// Which source a sequence comes from is a pure function of (seed, step, sequence index), like the
// window itself (data/window_sampler.h), so every parallel layout draws the same sequences (a data
// replica fills its own range of sequence indices) and a resumed run continues the same draw from
// the step number alone. The global sample number n = step * global_batch_size + sequence_index
// is placed on the unit interval by the Weyl sequence u_n = frac(o + n * phi) (phi the golden
// ratio, o from the seed, in exact 64-bit fixed point), and the source is the one whose slice of
// the cumulative normalised weights holds u_n. Over any N consecutive samples each source's share
// differs from its weight by O(log N / N) — far tighter than independent draws — which plays the
// role of Megatron's error-minimising blending index, without a per-sample table.
// The window inside the chosen source is training_window_offset() with a per-source seed. With a
// single source, sequences are exactly those of fill_batch() on that source.
//
// Thread-safe (const).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/token_source.h"

namespace moe4d {

struct BlendSource {
  std::unique_ptr<TokenSource> tokens;
  double weight = 1.0;  // > 0; normalised over the sources
  std::string label;    // the path as configured: names the source in metrics and messages
};

class BlendedDataset {
 public:
  // Throws moe4d::Error for no sources, a non-positive or non-finite weight, or a source shorter
  // than seq_len + 1 tokens (naming it). global_batch_size > 0 numbers the samples of a step.
  BlendedDataset(std::vector<BlendSource> sources, int64_t global_batch_size, int seq_len);

  int num_sources() const { return static_cast<int>(sources_.size()); }
  const BlendSource& source(int index) const { return sources_[static_cast<size_t>(index)]; }
  double normalised_weight(int index) const { return weights_[static_cast<size_t>(index)]; }

  // Index of the source that sequence `sequence_index` of `step` is drawn from.
  int source_of(uint64_t seed, int64_t step, int64_t sequence_index) const;
  // Sequences first_sequence .. first_sequence + count - 1 of `step`; inputs/targets [count, seq_len].
  void fill_batch(uint64_t seed, int64_t step, int64_t first_sequence, int64_t count, int32_t* inputs,
                  int32_t* targets) const;
  // How many of the global batch's sequences of `step` each source supplies (no data is read).
  std::vector<int64_t> sequences_per_source(uint64_t seed, int64_t step) const;

 private:
  std::vector<BlendSource> sources_;
  std::vector<double> weights_;     // normalised
  std::vector<double> cumulative_;  // upper edge of each source's slice of [0, 1)
  int64_t global_batch_size_;
  int seq_len_;
};

}  // namespace moe4d
