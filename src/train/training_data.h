// train/training_data.h — the data sources of a config, opened for training.
//
// data.train becomes a BlendedDataset (data/blended_dataset.h) of its sources (one for a plain
// path), each opened in its own format or data.format; data.valid one TokenSource. Token shards
// whose recorded vocab_size exceeds model.vocab_size are rejected here; formats without a recorded
// vocabulary (Megatron) check every id they read against model.vocab_size.
#pragma once

#include <memory>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "data/blended_dataset.h"
#include "data/token_source.h"

namespace moe4d {

// Throws moe4d::Error naming the config and the file for a missing or invalid source.
std::unique_ptr<BlendedDataset> open_training_blend(const Config& config);
// Null when data.valid is empty.
std::unique_ptr<TokenSource> open_validation_source(const Config& config);

// {"tokens_per_source": {"<label>": tokens of the global batch of `step` drawn from it, ...}}:
// a pure function of (seed, step), so every rank can write it without communication.
nlohmann::json blend_step_record(const BlendedDataset& blend, uint64_t seed, int64_t step, int seq_len);

}  // namespace moe4d
