// data/hf_tokenizer.h — a Tokenizer read from a Hugging Face `tokenizer.json`: byte-level BPE, as
// GPT-2, Llama-3, Qwen2/Qwen3 and DeepSeek-V3 ship it.
//
// Encoding follows the `tokenizers` library's `encode(text, add_special_tokens=False)`:
//   1. added tokens (special or not) are cut out of the raw text first, leftmost-longest;
//   2. each remaining segment is normalised (none, or NFC) and pre-tokenized: the Split
//      pre-tokenizers' regexes (behavior "Isolated": matches and the text between them become
//      pieces; data/pretokenizer_regex.h), then ByteLevel (each UTF-8 byte -> one GPT-2 byte
//      character; with use_regex, GPT-2's own regex first);
//   3. each piece is BPE-merged: lowest merge rank first, leftmost among equals (ignore_merges: a
//      piece that is itself in the vocabulary is one token).
// The post-processor (e.g. Llama-3's BOS template) is not applied: moe4d ends every document with
// the end-of-text token instead. decode() is the ByteLevel decoder; an added token decodes to its
// content and the end-of-text token to nothing. Invalid UTF-8 is encoded byte by byte and
// round-trips exactly.
//
// End of text (eos_id): the first of <|endoftext|> (GPT-2, Qwen), <|end_of_text|> (Llama-3),
// <｜end▁of▁sentence｜> (DeepSeek), </s>, <eos> that the file defines.
//
// Anything else is refused at load with one moe4d::Error line naming it: other models (WordPiece,
// Unigram, WordLevel), BPE without ByteLevel, dropout, subword prefixes/suffixes, other normalizers,
// pre-tokenizers and decoders, Split behaviours other than Isolated, added tokens with
// single_word/lstrip/rstrip, truncation, a vocabulary without all 256 byte characters.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "data/pretokenizer_regex.h"
#include "data/tokenizer.h"

namespace moe4d {

class HfTokenizer final : public Tokenizer {
 public:
  // Throws moe4d::Error naming `path` for a missing file, invalid JSON or anything unsupported.
  explicit HfTokenizer(const std::string& path);

  std::vector<int> encode(std::string_view text) const override;
  std::string decode(std::span<const int> ids) const override;
  int vocab_size() const override { return static_cast<int>(tokens_.size()); }
  int eos_id() const override { return eos_id_; }
  std::string name() const override;
  std::string spec() const override { return path_; }
  // The token's string as the file stores it (an added token's content; byte characters otherwise).
  const std::string& token(int id) const { return tokens_.at(static_cast<size_t>(id)); }

 private:
  struct AddedToken {
    std::string content;
    int id;
  };
  void load(const std::string& text);
  void encode_segment(std::string_view segment, std::vector<int>& ids) const;
  void encode_piece(std::string_view bytes, std::vector<int>& ids) const;

  std::string path_;
  std::vector<std::string> tokens_;    // by id, as stored (byte characters); "" for an unused id
  std::vector<bool> is_added_;         // by id: decodes to its content verbatim
  std::unordered_map<std::string, int> vocab_;
  std::unordered_map<uint64_t, std::pair<int, int>> merges_;  // (left id << 32 | right id) -> (rank, merged id)
  int byte_ids_[256] = {};
  std::vector<AddedToken> added_;                // longest first
  std::vector<int> added_by_first_byte_[256];    // indices into added_, longest first
  std::vector<PretokenizerRegex> splits_;
  bool nfc_ = false, ignore_merges_ = false;
  int eos_id_ = -1;
};

// The GPT-2 byte <-> character map of ByteLevel: printable bytes map to themselves, the others to
// U+0100 onwards.
char32_t byte_level_char(unsigned char byte);

}  // namespace moe4d
