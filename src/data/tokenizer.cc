// data/tokenizer.cc — tokenizer factory and the model-vocabulary check.
#include "data/tokenizer.h"

#include "core/error.h"
#include "data/byte_tokenizer.h"
#include "data/sentencepiece_tokenizer.h"

namespace moe4d {

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& spec) {
  if (spec.empty()) fail("tokenizer spec is empty (expected \"bytes\" or the path of a sentencepiece .model file)");
  if (spec == "bytes") return std::make_unique<ByteTokenizer>();
  return std::make_unique<SentencePieceTokenizer>(spec);
}

void check_vocab_fits(int tokenizer_vocab, int model_vocab) {
  if (model_vocab < tokenizer_vocab)
    fail("model.vocab_size {} is smaller than the tokenizer's vocabulary of {} ids (expected model.vocab_size >= {})",
         model_vocab, tokenizer_vocab, tokenizer_vocab);
}

}  // namespace moe4d
