// data/byte_tokenizer.h — the trivial tokenizer: token i < 256 is byte i, token 256 is end-of-sequence.
//
// vocab_size() is 257, so a model trained on byte shards needs model.vocab_size >= 257 (256 bytes
// cannot hold the EOS id that separates documents). Any byte string, valid UTF-8 or not,
// round-trips exactly. Spec: "bytes".
#pragma once

#include "data/tokenizer.h"

namespace moe4d {

class ByteTokenizer final : public Tokenizer {
 public:
  static constexpr int kEosId = 256;
  static constexpr int kVocabSize = 257;

  std::vector<int> encode(std::string_view text) const override;
  std::string decode(std::span<const int> ids) const override;
  int vocab_size() const override { return kVocabSize; }
  int eos_id() const override { return kEosId; }
  std::string name() const override;
  std::string spec() const override { return "bytes"; }
};

}  // namespace moe4d
