// data/tokenizer.cc — tokenizer factory and the model-vocabulary check.
#include "data/tokenizer.h"

#include "core/error.h"
#include <fstream>

#include "data/byte_tokenizer.h"
#include "data/hf_tokenizer.h"
#include "data/sentencepiece_tokenizer.h"

namespace moe4d {

bool is_hf_tokenizer_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char c = 0;
  while (in.get(c) && (c == ' ' || c == '\t' || c == '\n' || c == '\r')) {
  }
  return in && c == '{';  // a JSON object; a sentencepiece model is a protobuf, which never starts so
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& spec) {
  if (spec.empty())
    fail("tokenizer spec is empty (expected \"bytes\", a sentencepiece .model or a Hugging Face tokenizer.json)");
  if (spec == "bytes") return std::make_unique<ByteTokenizer>();
  if (is_hf_tokenizer_file(spec)) return std::make_unique<HfTokenizer>(spec);
  return std::make_unique<SentencePieceTokenizer>(spec);
}

void check_vocab_fits(int tokenizer_vocab, int model_vocab) {
  if (model_vocab < tokenizer_vocab)
    fail("model.vocab_size {} is smaller than the tokenizer's vocabulary of {} ids (expected model.vocab_size >= {})",
         model_vocab, tokenizer_vocab, tokenizer_vocab);
}

}  // namespace moe4d
