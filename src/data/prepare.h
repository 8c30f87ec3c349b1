// data/prepare.h — `moe4d prepare`: corpus files -> tokenizer + train/valid token shards.
//
// Steps: list the input files (data/corpus_reader.h), cut them into documents, split the documents
// into train/valid by hash(seed, document index) < valid_fraction, train a byte-fallback BPE
// tokenizer on the train documents (or use bytes), encode every document followed by the
// tokenizer's end-of-sequence id, write the shards atomically and re-open them with full
// verification. Output directory:
//   tokenizer.model           (bpe only; shard headers refer to it by this relative name)
//   train.bin / train.json    (data/token_shard_format.h)
//   valid.bin / valid.json
// The same inputs and options always produce byte-identical files.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "data/corpus_reader.h"

namespace moe4d {

inline constexpr int kDefaultBpeVocabSize = 4096;

struct PrepareOptions {
  std::vector<std::string> inputs = {kDefaultCorpusDir};  // files or directories
  std::string output_dir;                                 // created if missing
  std::string tokenizer = "bpe";                          // "bpe" | "bytes"
  std::optional<int> vocab_size;                          // bpe only; default kDefaultBpeVocabSize
  double valid_fraction = 0.05;                           // in (0, 1)
  uint64_t seed = 1234;                                   // train/valid split (and BPE subsampling)
  bool verbose = false;                                   // show sentencepiece's training log
  std::function<void(const std::string&)> progress;       // progress lines; null: silent
};

struct PrepareSummary {
  int64_t files = 0;
  int64_t bytes = 0;           // of the input files
  int64_t document_bytes = 0;  // of the documents (separator lines excluded)
  int64_t documents = 0;
  int64_t train_documents = 0;
  int64_t valid_documents = 0;
  int64_t train_tokens = 0;
  int64_t valid_tokens = 0;
  int vocab_size = 0;          // the tokenizer's; model.vocab_size must be >= this
  std::string tokenizer_spec;  // load_tokenizer() spec of the written/used tokenizer
  std::string tokenizer_name;
  std::string train_path;  // .bin paths
  std::string valid_path;
  double tokenizer_seconds = 0;  // BPE training time
  double seconds = 0;            // whole run
};

// Throws moe4d::Error for bad options (unknown tokenizer, vocab_size given for bytes or too small,
// valid_fraction outside (0, 1)), no input files, an empty corpus or fewer than 2 documents, and an
// output directory that cannot be created or written.
PrepareSummary prepare_corpus(const PrepareOptions& options);

// Multi-line human summary (what was written, sizes, bytes per token, the model.vocab_size to use).
std::string format_prepare_summary(const PrepareSummary& summary);

}  // namespace moe4d
