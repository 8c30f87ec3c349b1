// data/byte_tokenizer.cc — ByteTokenizer: bytes are ids, plus one end-of-sequence id.
#include "data/byte_tokenizer.h"

#include "core/error.h"

namespace moe4d {

std::vector<int> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

std::string ByteTokenizer::decode(std::span<const int> ids) const {
  std::string text;
  text.reserve(ids.size());
  for (int id : ids) {
    if (id == kEosId) continue;
    if (id < 0 || id > 255) fail("token id {} is outside the byte tokenizer's vocabulary [0, {})", id, kVocabSize);
    text.push_back(static_cast<char>(static_cast<unsigned char>(id)));
  }
  return text;
}

std::string ByteTokenizer::name() const {
  return fmt::format("bytes ({} ids: 256 bytes + end-of-sequence)", kVocabSize);
}

}  // namespace moe4d
