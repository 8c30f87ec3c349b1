// data/sharded_token_writer.h — one split (train or valid) of `prepare`'s output, in shards.
//
// Documents (their ids, ending in eos) go to <dir>/<split>.{bin,json} (moe4d format) or
// <dir>/<split>.{bin,idx} (Megatron format) — or, with shard_size > 0, to numbered shards
// <split>-00000, <split>-00001, ... each closed once it holds >= shard_size tokens, so a document
// never straddles two shards. Every shard is written atomically. finish() removes shards of the
// same split left by an earlier run that this run did not write (a stale <split>-00007 would
// otherwise be read as part of the data, see data/token_source.h). Every shard records the
// tokenizer's identity: in its moe4d header, or in the Megatron sidecar <stem>.tokenizer.json
// (data/tokenizer_record.h). Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "data/megatron_indexed_dataset.h"
#include "data/token_shard_writer.h"
#include "data/token_source.h"
#include "data/tokenizer_identity.h"

namespace moe4d {

class ShardedTokenWriter {
 public:
  ShardedTokenWriter(std::string dir, std::string split, TokenFormat format, int64_t vocab_size,
                     std::string tokenizer_spec, TokenizerIdentity identity, int64_t shard_size);
  void add_document(std::span<const int> ids);
  // Closes the last shard; returns the .bin paths written. Throws moe4d::Error if no document came.
  std::vector<std::string> finish();
  // For a split left empty on purpose (prepare --valid-fraction 0): writes nothing and removes this
  // split's files left by an earlier run, so that no stale shard is taken for this run's.
  void remove_stale();

  int64_t num_tokens() const { return tokens_; }
  int64_t num_documents() const { return documents_; }
  // What data.train / data.valid should name: the .bin of a single shard, else the stem.
  std::string data_path() const;

 private:
  std::string stem_of(int64_t shard) const;
  void close_shard();

  std::string dir_, split_;
  TokenFormat format_;
  int64_t vocab_size_;
  std::string tokenizer_spec_;
  TokenizerIdentity identity_;
  int64_t shard_size_;
  std::unique_ptr<TokenShardWriter> moe4d_;
  std::unique_ptr<MegatronIndexedDatasetWriter> megatron_;
  int64_t shard_tokens_ = 0;
  int64_t tokens_ = 0, documents_ = 0;
  std::vector<std::string> written_;
};

}  // namespace moe4d
