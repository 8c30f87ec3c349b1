// data/data_check.h — the inputs of a training run, opened and verified before training starts.
//
// check_training_data opens the train (and valid) token shards with full verification
// (TokenDataset::open: header, size, SHA-256, every id < the header's vocab_size) and the
// tokenizer, and checks the vocabularies against each other:
//   tokenizer ids <= model vocab_size      (the model may pad above, e.g. to divide over TP ranks)
//   shard header vocab_size <= tokenizer ids  (a shard never holds ids its tokenizer cannot decode)
//   shard header vocab_size <= model vocab_size
// The tokenizer is `tokenizer` when given ("bytes", a sentencepiece .model or a tokenizer.json), else the one the
// train shard's header names. Every failure is one moe4d::Error line that starts with the config
// key (data.train, data.valid, data.tokenizer) and names the file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/token_source.h"
#include "data/tokenizer_identity.h"

namespace moe4d {

struct TrainingDataSpec {
  std::string source;     // the config file, for messages
  std::string train;      // data.train: one moe4d shard; empty: only the tokenizer is checked
  std::string valid;      // data.valid (may be empty)
  std::string tokenizer;  // data.tokenizer (may be empty)
  int64_t model_vocab_size = 0;
};

void check_training_data(const TrainingDataSpec& spec);

// Tokenizer agreement (data/tokenizer_record.h): the identities recorded by every file of data.train
// and data.valid and that of data.tokenizer (or, without it, of the tokenizer the train headers
// name) must all be one. Reads headers and sidecars only.
struct TokenSourceRef {
  std::string key;  // "data.train", "data.train[1]", "data.valid"
  std::string path;
  TokenFormat format = TokenFormat::kMoe4d;
};
struct TokenizerAgreement {
  std::optional<TokenizerIdentity> identity;  // the run's tokenizer, when anything records or names it
  std::string spec;                           // its load_tokenizer() spec ("" if unknown)
  std::vector<std::string> unrecorded;        // files that record no identity (older shards, foreign datasets)
};
// Throws moe4d::Error "<source>: tokenizer mismatch: <one side>, but <the other>; ..." on disagreement.
TokenizerAgreement check_tokenizer_agreement(const std::string& source, const std::vector<TokenSourceRef>& sources,
                                             const std::string& tokenizer);
// One line for the log when `unrecorded` is not empty: which files, and why they cannot be checked.
std::string unrecorded_tokenizer_warning(const std::vector<std::string>& unrecorded);

}  // namespace moe4d
