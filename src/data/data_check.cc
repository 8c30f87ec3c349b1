// data/data_check.cc — check_training_data: shards, tokenizer and their vocabularies.
#include "data/data_check.h"

#include <initializer_list>
#include <memory>

#include "core/error.h"
#include "data/token_dataset.h"
#include "data/tokenizer.h"
#include "data/tokenizer_record.h"

namespace moe4d {
namespace {

// Runs `open`, prefixing any moe4d::Error with the config file and key.
template <typename F>
auto under_key(const std::string& source, const char* key, F&& open) {
  try {
    return open();
  } catch (const Error& e) {
    fail("{}: {}: {}", source, key, e.what());
  }
}
template <typename F>
auto under_key(const TrainingDataSpec& spec, const char* key, F&& open) {
  return under_key(spec.source, key, std::forward<F>(open));
}

}  // namespace

void check_training_data(const TrainingDataSpec& spec) {
  if (spec.train.empty()) {  // no single shard to take the tokenizer from: check a named one alone
    if (spec.tokenizer.empty()) return;
    const std::unique_ptr<Tokenizer> tokenizer =
        under_key(spec, "data.tokenizer", [&] { return load_tokenizer(spec.tokenizer); });
    if (tokenizer->vocab_size() > spec.model_vocab_size)
      fail("{}: model.vocab_size {} is smaller than the {} ids of the tokenizer {} (data.tokenizer); expected "
           "model.vocab_size >= {}",
           spec.source, spec.model_vocab_size, tokenizer->vocab_size(), spec.tokenizer, tokenizer->vocab_size());
    return;
  }
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

TokenizerAgreement check_tokenizer_agreement(const std::string& source, const std::vector<TokenSourceRef>& sources,
                                             const std::string& tokenizer) {
  TokenizerAgreement out;
  std::vector<TokenizerWitness> witnesses;
  if (!tokenizer.empty()) {
    out.spec = tokenizer;
    out.identity = under_key(source, "data.tokenizer", [&] { return tokenizer_identity_of(tokenizer); });
    witnesses.push_back({fmt::format("data.tokenizer {} is", tokenizer), *out.identity});
  }
  for (const TokenSourceRef& ref : sources) {
    const std::vector<RecordedTokenizer> recorded =
        under_key(source, ref.key.c_str(), [&] { return read_recorded_tokenizers(ref.path, ref.format); });
    for (const RecordedTokenizer& r : recorded) {
      if (!r.identity) {
        out.unrecorded.push_back(r.file);
        continue;
      }
      witnesses.push_back({fmt::format("{} {} was made with", ref.key, r.file), *r.identity});
      if (out.spec.empty() && !r.spec.empty()) {
        // No data.tokenizer: the run uses the tokenizer the first header names. It must still be
        // the file the shards were made with (a later prepare may have replaced it).
        out.spec = r.spec;
        out.identity = under_key(source, "data.tokenizer (from the header of data.train)",
                                 [&] { return tokenizer_identity_of(r.spec); });
        witnesses.push_back(
            {fmt::format("the tokenizer {} that {} names (data.tokenizer is not set) is", r.spec, r.file),
             *out.identity});
      }
    }
  }
  if (!out.identity && !witnesses.empty()) out.identity = witnesses.front().identity;
  try {
    check_tokenizers_agree(witnesses);
  } catch (const Error& e) {
    fail("{}: {}", source, e.what());
  }
  return out;
}

std::string unrecorded_tokenizer_warning(const std::vector<std::string>& unrecorded) {
  if (unrecorded.empty()) return "";
  return fmt::format(
      "{} token file{} record{} no tokenizer identity ({}{}): made by an older `moe4d prepare` or another tool "
      "(Megatron's own datasets have no sidecar), so {} not checked against data.tokenizer and the other inputs; "
      "re-run `moe4d prepare` to record it",
      unrecorded.size(), unrecorded.size() == 1 ? "" : "s", unrecorded.size() == 1 ? "s" : "", unrecorded.front(),
      unrecorded.size() > 1 ? fmt::format(" and {} more", unrecorded.size() - 1) : "",
      unrecorded.size() == 1 ? "its tokenizer is" : "their tokenizers are");
}

}  // namespace moe4d
