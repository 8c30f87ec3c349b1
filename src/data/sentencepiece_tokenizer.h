// data/sentencepiece_tokenizer.h — a Tokenizer backed by a sentencepiece .model file.
//
// Normally the byte-fallback BPE model written by train_bpe_tokenizer (data/bpe_trainer.h), whose
// ids are: 0 <unk>, 1 </s> (end of sequence), 2..257 the byte pieces <0x00>..<0xFF>, then the
// learned pieces. Models from elsewhere are accepted if they define an end-of-sequence piece;
// without byte fallback, characters they do not know encode to <unk> and do not round-trip.
// Invalid UTF-8 input is replaced by U+FFFD by sentencepiece's normaliser, so only valid UTF-8
// round-trips exactly.
#pragma once

#include <memory>

#include "data/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}  // namespace sentencepiece

namespace moe4d {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // Throws moe4d::Error naming `model_path` if it is missing, unreadable, not a sentencepiece model,
  // or has no end-of-sequence piece.
  explicit SentencePieceTokenizer(const std::string& model_path);
  ~SentencePieceTokenizer() override;
  SentencePieceTokenizer(const SentencePieceTokenizer&) = delete;
  SentencePieceTokenizer& operator=(const SentencePieceTokenizer&) = delete;

  std::vector<int> encode(std::string_view text) const override;
  std::string decode(std::span<const int> ids) const override;
  int vocab_size() const override { return vocab_size_; }
  int eos_id() const override { return eos_id_; }
  std::string name() const override;
  std::string spec() const override { return model_path_; }

 private:
  std::string model_path_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  int vocab_size_ = 0;
  int eos_id_ = -1;
};

// sentencepiece error texts look like "./src/x.cc(580) [condition] message"; this keeps the message
// part, on one line (empty if there is none).
std::string sentencepiece_error_text(std::string_view error_message);

}  // namespace moe4d
