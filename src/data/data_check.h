// data/data_check.h — the inputs of a training run, opened and verified before training starts.
//
// check_training_data opens the train (and valid) token shards with full verification
// (TokenDataset::open: header, size, SHA-256, every id < the header's vocab_size) and the
// tokenizer, and checks the vocabularies against each other:
//   tokenizer ids <= model vocab_size      (the model may pad above, e.g. to divide over TP ranks)
//   shard header vocab_size <= tokenizer ids  (a shard never holds ids its tokenizer cannot decode)
//   shard header vocab_size <= model vocab_size
// The tokenizer is `tokenizer` when given ("bytes" or a sentencepiece .model), else the one the
// train shard's header names. Every failure is one moe4d::Error line that starts with the config
// key (data.train, data.valid, data.tokenizer) and names the file.
#pragma once

#include <cstdint>
#include <string>

namespace moe4d {

struct TrainingDataSpec {
  std::string source;     // the config file, for messages
  std::string train;      // data.train
  std::string valid;      // data.valid (may be empty)
  std::string tokenizer;  // data.tokenizer (may be empty)
  int64_t model_vocab_size = 0;
};

void check_training_data(const TrainingDataSpec& spec);

}  // namespace moe4d
