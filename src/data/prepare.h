// data/prepare.h — `moe4d prepare`: corpus files -> tokenizer + train/valid token shards.
//
// Steps, all streaming (memory stays bounded whatever the corpus size):
//   1. list the input files (data/corpus_reader.h: directories recursively, --include/--exclude);
//   2. tokenizer: reuse --tokenizer-model, use bytes, or train byte-fallback BPE on a bounded,
//      deterministic sample of the train documents: a first pass over the corpus keeps the
//      documents with the smallest hash(seed, index) up to bpe_sample_bytes (a uniform sample of
//      documents that does not depend on the corpus order or size);
//   3. a second pass reads documents (data/corpus_document_stream.h: text with separators, JSONL,
//      .gz/.xz/.zst, binary files skipped), tokenizes them on `workers` threads
//      (data/parallel_encoder.h), puts an end-of-sequence id after every document and sends each to
//      the train or valid split (data/validation_split.h), written as shards of shard_size tokens
//      in the moe4d or Megatron format (data/sharded_token_writer.h);
//   4. the moe4d shards are re-opened with full verification.
// Output directory:
//   tokenizer.model           (bpe, or a copy of a sentencepiece --tokenizer-model; moe4d headers refer to it)
//   tokenizer.json            instead, a copy of a Hugging Face --tokenizer-model (data/hf_tokenizer.h)
//   train.bin + train.json    (moe4d, data/token_shard_format.h) or train.bin + train.idx (megatron)
//   valid.*                   likewise (none with valid_fraction 0); with shard_size > 0: train-00000.*, ...
//   <split>.tokenizer.json    megatron only: the tokenizer's identity (data/tokenizer_record.h)
// The same inputs and options always produce byte-identical files, whatever `workers` is.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "data/corpus_document_stream.h"
#include "data/corpus_reader.h"

namespace moe4d {

inline constexpr int kDefaultBpeVocabSize = 4096;
inline constexpr int64_t kDefaultBpeSampleBytes = int64_t(16) << 20;

// What the progress bar shows; sent about twice a second during the encoding pass.
struct PrepareProgress {
  int64_t file_bytes_done = 0;   // bytes of the input files read (compressed size if compressed)
  int64_t file_bytes_total = 0;  // all input files
  int64_t documents = 0;
  int64_t tokens = 0;
  double seconds = 0;            // of this pass
  bool final = false;            // the last report of the pass
};

struct PrepareOptions {
  std::vector<std::string> inputs = {kDefaultCorpusDir};  // files or directories
  std::string output_dir;                                 // created if missing
  std::string tokenizer = "bpe";                          // "bpe" | "bytes"
  std::string tokenizer_model;                            // reuse this .model / tokenizer.json (no training)
  std::optional<int> vocab_size;                          // bpe only; default kDefaultBpeVocabSize
  double valid_fraction = 0.05;                           // in [0, 1); 0: no validation split (no valid shard)
  std::optional<int64_t> min_valid_documents;             // the minimum count rule (data/validation_split.h);
                                                          // default 1, or 0 with valid_fraction 0
  uint64_t seed = 1234;                                   // train/valid split and the BPE sample
  CorpusFormatOptions format;                             // --format, --doc-separator, --json-key, --skip-bad-lines
  CorpusFileFilter filter;                                // --include / --exclude
  std::string output_format = "moe4d";                    // "moe4d" | "megatron"
  int64_t shard_size = 0;                                 // tokens per shard; 0: one shard per split
  int workers = 1;                                        // tokenizer threads
  int64_t bpe_sample_bytes = kDefaultBpeSampleBytes;      // cap of the BPE training sample
  bool verbose = false;                                   // show sentencepiece's training log
  std::function<void(const std::string&)> progress;       // progress lines; null: silent
  std::function<void(const PrepareProgress&)> progress_bar;  // null: none
};

struct PrepareSummary {
  std::vector<std::string> inputs;  // the files and directories read (as given)
  bool default_corpus = false;      // inputs is the demo corpus kDefaultCorpusDir (no --input)
  int64_t files = 0;
  int64_t binary_files = 0;    // skipped
  int64_t bad_lines = 0;       // JSONL lines skipped (--skip-bad-lines)
  int64_t bytes = 0;           // of the input files on disk
  int64_t text_bytes = 0;      // decompressed
  int64_t document_bytes = 0;  // of the documents (separator lines excluded)
  int64_t documents = 0;
  int64_t invalid_utf8_documents = 0;
  int64_t train_documents = 0;
  int64_t valid_documents = 0;
  int64_t train_tokens = 0;
  int64_t valid_tokens = 0;
  int vocab_size = 0;          // the tokenizer's; model.vocab_size must be >= this
  std::string tokenizer_spec;  // load_tokenizer() spec of the written/used tokenizer
  std::string tokenizer_name;
  std::string output_format;
  std::string train_path;  // what data.train / data.valid should name (.bin, or the stem when sharded)
  std::string valid_path;  // empty with valid_fraction 0
  std::vector<std::string> train_shards;  // .bin paths
  std::vector<std::string> valid_shards;
  std::string split_note;         // set when the minimum count rule overrode the fraction
  double tokenizer_seconds = 0;   // BPE sample pass + training
  double encode_seconds = 0;      // the encoding pass
  double seconds = 0;             // whole run
};

// Throws moe4d::Error for bad options, no input files, an empty corpus or one too small to split,
// bad input the format rejects (naming the file and line), and an output directory that cannot be
// created or written.
PrepareSummary prepare_corpus(const PrepareOptions& options);

// Multi-line human summary (what was written, counts, speeds, the model.vocab_size to use).
std::string format_prepare_summary(const PrepareSummary& summary);

}  // namespace moe4d
