// data/bpe_trainer.cc — deterministic byte-fallback BPE training through sentencepiece.
#include "data/bpe_trainer.h"

#include <sentencepiece_trainer.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "core/error.h"
#include "core/rng.h"
#include "data/atomic_file.h"
#include "data/sentencepiece_tokenizer.h"

namespace moe4d {
namespace {

// Ids 0 (<unk>) and 1 (</s>) plus the 256 byte-fallback pieces exist before any learned piece.
constexpr int kReservedPieces = 258;

class LineIterator final : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(const std::vector<std::string>& lines) : lines_(lines) {}
  bool done() const override { return index_ >= lines_.size(); }
  void Next() override { ++index_; }
  const std::string& value() const override { return lines_[index_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& lines_;
  size_t index_ = 0;
};

// Keeps `keep` lines chosen by the smallest hash(seed, index), in their original order.
std::vector<std::string> subsample_lines(std::vector<std::string> lines, int64_t keep, uint64_t seed) {
  std::vector<std::pair<uint64_t, size_t>> keys(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) keys[i] = {hash_combine(seed, i), i};
  std::nth_element(keys.begin(), keys.begin() + keep, keys.end());
  std::vector<size_t> chosen(static_cast<size_t>(keep));
  for (int64_t i = 0; i < keep; ++i) chosen[i] = keys[i].second;
  std::sort(chosen.begin(), chosen.end());
  std::vector<std::string> out;
  out.reserve(chosen.size());
  for (size_t i : chosen) out.push_back(std::move(lines[i]));
  return out;
}

[[noreturn]] void fail_training(const sentencepiece::util::Status& status, int vocab_size, const std::string& source) {
  std::string message = sentencepiece_error_text(status.error_message());
  int asked = 0, bound = 0;
  size_t at = message.find("smaller than required_chars. ");
  if (at != std::string::npos &&
      std::sscanf(message.c_str() + at, "smaller than required_chars. %d vs %d", &asked, &bound) == 2)
    fail("BPE vocab size {} is too small for {}: its characters plus the {} reserved ids need at least {}", vocab_size,
         source, kReservedPieces, bound);
  at = message.find("Please set it to a value <= ");
  if (at != std::string::npos && std::sscanf(message.c_str() + at, "Please set it to a value <= %d", &bound) == 1)
    fail("BPE vocab size {} is too large for {}: it yields at most {} distinct pieces", vocab_size, source, bound);
  fail("BPE training with vocab size {} on {} failed: {}", vocab_size, source, message);
}

}  // namespace

void check_bpe_vocab_size(int vocab_size) {
  if (vocab_size <= kReservedPieces)
    fail(
        "BPE vocab size {} is too small: it must exceed the {} reserved ids (<unk>, </s>, 256 byte pieces) and "
        "also hold the corpus characters (expected a few hundred or more)",
        vocab_size, kReservedPieces);
}

std::vector<std::string> split_lines_keep_newlines(std::string_view text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    end = end == std::string_view::npos ? text.size() : end + 1;
    lines.emplace_back(text.substr(start, end - start));
    start = end;
  }
  return lines;
}

std::string train_bpe_tokenizer(const std::string& corpus_text_file, int vocab_size, const std::string& output_prefix,
                                uint64_t seed, const BpeTrainOptions& options) {
  std::ifstream in(corpus_text_file, std::ios::binary);
  if (!in) fail("cannot read tokenizer training corpus {}", corpus_text_file);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail("error while reading tokenizer training corpus {}", corpus_text_file);
  return train_bpe_tokenizer_on_lines(split_lines_keep_newlines(text.str()), vocab_size, output_prefix, seed,
                                      corpus_text_file, options);
}

std::string train_bpe_tokenizer_on_lines(std::vector<std::string> lines, int vocab_size,
                                         const std::string& output_prefix, uint64_t seed, const std::string& source,
                                         const BpeTrainOptions& options) {
  check_bpe_vocab_size(vocab_size);
  if (options.max_sentences <= 0) fail("BPE max_sentences is {}, expected > 0", options.max_sentences);
  if (lines.empty()) fail("tokenizer training corpus {} is empty", source);
  if (static_cast<int64_t>(lines.size()) > options.max_sentences)
    lines = subsample_lines(std::move(lines), options.max_sentences, seed);

  const std::unordered_map<std::string, std::string> args = {
      {"model_type", "bpe"},
      {"vocab_size", std::to_string(vocab_size)},
      {"byte_fallback", "true"},
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "false"},
      {"unk_id", "0"},
      {"eos_id", "1"},
      {"bos_id", "-1"},
      {"pad_id", "-1"},
      {"num_threads", "1"},
      {"input_sentence_size", "0"},
      {"shuffle_input_sentence", "false"},
      {"max_sentence_length", std::to_string(1 << 24)},
      {"minloglevel", options.verbose ? "0" : "2"},
  };
  LineIterator iterator(lines);
  std::string model;  // serialised here (model_prefix must then stay unset) and written atomically below
  sentencepiece::util::Status status = sentencepiece::SentencePieceTrainer::Train(args, &iterator, &model);
  if (!status.ok()) fail_training(status, vocab_size, source);
  std::string model_path = output_prefix + ".model";
  write_file_atomically(model_path, model);
  return model_path;
}

}  // namespace moe4d
