// data/token_source.h — a stream of token ids that training windows are cut from, whatever the
// format on disk.
//
// Implementations: one moe4d token shard (data/token_dataset.h), one Megatron indexed dataset
// (data/megatron_indexed_dataset.h), and the concatenation of numbered shards that
// `prepare --shard-size` writes (<stem>-00000, <stem>-00001, ...). The window sampler
// (data/window_sampler.h) and blends (data/blended_dataset.h) only see this interface.
//
// Thread safety: all methods are const and safe to call concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/token_dataset.h"

namespace moe4d {

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  virtual int64_t num_tokens() const = 0;
  virtual int64_t num_documents() const = 0;
  // The vocabulary size the files record, or 0 if the format records none (Megatron).
  virtual int64_t vocab_size() const = 0;
  // For messages: the file (or first file) holding the tokens.
  virtual std::string name() const = 0;
  // Copies ids [offset, offset + count) into `out`. Offsets out of range are a caller bug (CHECK);
  // an id the source cannot hold is a moe4d::Error naming the file and the index.
  virtual void read(int64_t offset, int64_t count, int32_t* out) const = 0;
  // The tokenizer the files name (a moe4d shard header's load_tokenizer() spec); empty if none.
  virtual std::string tokenizer_spec() const { return ""; }
};

// A borrowed TokenDataset seen as a TokenSource.
class TokenDatasetView final : public TokenSource {
 public:
  explicit TokenDatasetView(const TokenDataset& dataset) : dataset_(dataset) {}
  int64_t num_tokens() const override { return dataset_.num_tokens(); }
  int64_t num_documents() const override { return dataset_.num_documents(); }
  int64_t vocab_size() const override { return dataset_.vocab_size(); }
  std::string name() const override { return dataset_.paths().bin; }
  void read(int64_t offset, int64_t count, int32_t* out) const override { dataset_.read(offset, count, out); }
  std::string tokenizer_spec() const override { return dataset_.tokenizer_spec(); }

 private:
  const TokenDataset& dataset_;
};

enum class TokenFormat { kMoe4d, kMegatron };

// "moe4d" | "megatron"; throws moe4d::Error naming `what` otherwise.
TokenFormat parse_token_format(const std::string& name, const std::string& what);

// Name of shard `index` of `stem` as `prepare --shard-size` writes it: "<stem>-00003".
std::string numbered_shard_stem(const std::string& stem, int64_t index);

// Opens the tokens at `path`: one shard of `format` (moe4d: .bin, .json or stem; megatron: the
// prefix, .bin or .idx) or, when no such shard exists, the numbered shards <path>-00000,
// <path>-00001, ... (all that exist, in order) read as one stream. `id_limit` (model.vocab_size)
// bounds the ids of formats that record no vocabulary. Throws moe4d::Error naming the path and
// the files looked for if nothing is there.
std::unique_ptr<TokenSource> open_token_source(const std::string& path, TokenFormat format, int64_t id_limit);

// Size of the tokens at `path` (as open_token_source finds them) from the headers alone (moe4d) or
// the index (Megatron), without reading or verifying the tokens: for the start-of-run summary.
struct TokenSourceStats {
  int64_t files = 0;  // shards
  int64_t tokens = 0;
  int64_t documents = 0;
};
TokenSourceStats token_source_stats(const std::string& path, TokenFormat format, int64_t id_limit);

}  // namespace moe4d
