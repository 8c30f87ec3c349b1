// data/bpe_trainer.h — trains the byte-fallback BPE tokenizer that `moe4d prepare` uses.
//
// Wraps sentencepiece::SentencePieceTrainer with settings chosen for moe4d:
//   model_type=bpe, byte_fallback (any text encodes; ids 2..257 are the 256 byte pieces),
//   normalization identity with whitespace kept as is and no dummy prefix (decode(encode(x)) == x
//   for valid UTF-8, ASCII art included), ids 0 <unk> and 1 </s> (end of sequence), no <s>/<pad>,
//   num_threads=1 and no sentencepiece-side sampling or shuffling, so training is deterministic:
//   the same lines, vocab_size and seed give a byte-identical .model file.
// Every training line keeps its trailing '\n', so line breaks become learnable pieces instead of
// one byte-fallback token each.
//
// Not thread-safe: sentencepiece's log level is process-wide state of that library, set on every
// call from `options.verbose`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moe4d {

struct BpeTrainOptions {
  // Corpora with more lines than this train on a deterministic subsample of max_sentences lines,
  // chosen by hash(seed, line index); this is the only use of the seed.
  int64_t max_sentences = 4'000'000;
  bool verbose = false;  // let sentencepiece print its training log
};

// Trains on the lines of `corpus_text_file` (UTF-8 text) and writes `output_prefix`.model
// atomically. Returns that path. Throws moe4d::Error naming the file or the vocab size if the
// corpus is missing or empty, or vocab_size does not fit the corpus (too small for 256 byte pieces
// + <unk> + </s> + its characters, or larger than the corpus can fill).
std::string train_bpe_tokenizer(const std::string& corpus_text_file, int vocab_size, const std::string& output_prefix,
                                uint64_t seed, const BpeTrainOptions& options = {});

// The same, on lines already in memory (each normally ending in '\n'); `source` names them in errors.
std::string train_bpe_tokenizer_on_lines(std::vector<std::string> lines, int vocab_size,
                                         const std::string& output_prefix, uint64_t seed, const std::string& source,
                                         const BpeTrainOptions& options = {});

// Throws moe4d::Error unless vocab_size exceeds the 258 ids every model reserves (<unk>, </s> and the
// 256 byte pieces). The corpus characters need more; training reports that with the exact minimum.
void check_bpe_vocab_size(int vocab_size);

// Splits text into lines, each keeping its '\n' (the last one may lack it); empty text gives none.
std::vector<std::string> split_lines_keep_newlines(std::string_view text);

}  // namespace moe4d
