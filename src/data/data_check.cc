// data/data_check.cc — check_training_data: shards, tokenizer and their vocabularies.
#include "data/data_check.h"

#include <initializer_list>
#include <memory>

#include "core/error.h"
#include "data/token_dataset.h"
#include "data/tokenizer.h"

namespace moe4d {
namespace {

// Runs `open`, prefixing any moe4d::Error with the config file and key.
template <typename F>
auto under_key(const TrainingDataSpec& spec, const char* key, F&& open) {
  try {
    return open();
  } catch (const Error& e) {
    fail("{}: {}: {}", spec.source, key, e.what());
  }
}

}  // namespace

void check_training_data(const TrainingDataSpec& spec) {
  const TokenDataset train = under_key(spec, "data.train", [&] { return TokenDataset::open(spec.train); });
  std::unique_ptr<TokenDataset> valid;
  if (!spec.valid.empty())
    valid = under_key(spec, "data.valid", [&] { return std::make_unique<TokenDataset>(TokenDataset::open(spec.valid)); });

  const bool from_header = spec.tokenizer.empty();
  const std::string tokenizer_spec = from_header ? train.tokenizer_spec() : spec.tokenizer;
  const char* tokenizer_key = from_header ? "data.tokenizer (from the header of data.train)" : "data.tokenizer";
  const std::unique_ptr<Tokenizer> tokenizer =
      under_key(spec, tokenizer_key, [&] { return load_tokenizer(tokenizer_spec); });
  const int64_t ids = tokenizer->vocab_size();
  if (ids > spec.model_vocab_size)
    fail("{}: model.vocab_size {} is smaller than the {} ids of the tokenizer {} ({}); expected model.vocab_size >= {}",
         spec.source, spec.model_vocab_size, ids, tokenizer_spec, tokenizer_key, ids);
  for (const TokenDataset* shard : std::initializer_list<const TokenDataset*>{&train, valid.get()}) {
    if (!shard) continue;
    const char* key = shard == &train ? "data.train" : "data.valid";
    if (shard->vocab_size() > ids)
      fail("{}: {}: token shard {} has vocab_size {}, more ids than the {} of the tokenizer {}; expected a shard "
           "written with this tokenizer",
           spec.source, key, shard->paths().json, shard->vocab_size(), ids, tokenizer_spec);
    if (shard->vocab_size() > spec.model_vocab_size)
      fail("{}: {}: token shard {} has vocab_size {}, larger than model.vocab_size {}", spec.source, key,
           shard->paths().json, shard->vocab_size(), spec.model_vocab_size);
  }
}

}  // namespace moe4d
