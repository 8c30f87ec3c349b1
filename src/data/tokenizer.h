// data/tokenizer.h — the text <-> token-id interface used by `prepare`, training and `generate`.
//
// Three implementations exist: ByteTokenizer (data/byte_tokenizer.h: every byte is a token, plus one
// end-of-sequence id), SentencePieceTokenizer (data/sentencepiece_tokenizer.h: a sentencepiece
// .model, normally the byte-fallback BPE model that `moe4d prepare` trains) and HfTokenizer
// (data/hf_tokenizer.h: a Hugging Face tokenizer.json with byte-level BPE, as Llama-3, Qwen and
// DeepSeek-V3 ship it). All round-trip any valid UTF-8 text exactly: decode(encode(text)) == text.
//
// Vocabulary contract: a tokenizer's ids are 0..vocab_size()-1. The model's `model.vocab_size` must
// be at least that (check_vocab_fits); it may be larger, e.g. rounded up so that the vocabulary
// divides evenly over tensor-parallel ranks. Ids >= the tokenizer's vocab_size never occur in
// token shards; decode() rejects them.
//
// Thread safety: all methods are const and safe to call concurrently.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace moe4d {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Token ids of `text`. No end-of-sequence id is added: callers append eos_id() between documents.
  virtual std::vector<int> encode(std::string_view text) const = 0;
  // The text of `ids`. The end-of-sequence id decodes to nothing. Throws moe4d::Error for an id
  // outside [0, vocab_size()).
  virtual std::string decode(std::span<const int> ids) const = 0;
  virtual int vocab_size() const = 0;
  virtual int eos_id() const = 0;
  // Human-readable description for logs, e.g. "sentencepiece bpe (4096 ids) from out/tokenizer.model".
  virtual std::string name() const = 0;
  // The string load_tokenizer() accepts to build this tokenizer again: "bytes" or the file's path.
  virtual std::string spec() const = 0;
};

// "bytes" -> ByteTokenizer; anything else is a file: a JSON object is a Hugging Face tokenizer.json
// (whatever its name: checkpoints carry their tokenizer as tokenizer.model), else a sentencepiece
// .model. Throws moe4d::Error naming the spec if the file is missing or not a valid tokenizer.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& spec);

// Whether `path` holds a JSON object (a Hugging Face tokenizer.json) rather than a sentencepiece model.
bool is_hf_tokenizer_file(const std::string& path);

// Throws moe4d::Error unless model_vocab >= tokenizer_vocab (called by training before it builds the
// model, so that a too-small `model.vocab_size` is reported instead of indexing past the embedding).
void check_vocab_fits(int tokenizer_vocab, int model_vocab);

}  // namespace moe4d
