// data/token_shard_writer.h — streams token ids into a shard (data/token_shard_format.h).
//
// The .bin is written under a temporary name and renamed when finish() succeeds, then the .json is
// written the same way; a writer destroyed before finish() leaves no files behind. Ids are checked
// against vocab_size as they are appended, so a shard never holds an id its header disallows.
// Move-only; not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/sha256.h"
#include "data/atomic_file.h"
#include "data/token_shard_format.h"

namespace moe4d {

class TokenShardWriter {
 public:
  // `path`: the .bin, the .json or the stem. `tokenizer_spec` is stored verbatim in the header, and
  // `identity` (which `moe4d prepare` always gives) as its "tokenizer_identity".
  // Throws moe4d::Error if vocab_size is not positive or the .bin cannot be created.
  TokenShardWriter(const std::string& path, int64_t vocab_size, std::string tokenizer_spec,
                   std::optional<TokenizerIdentity> identity = std::nullopt);

  // Appends ids; throws moe4d::Error naming the shard for an id outside [0, vocab_size).
  void append(std::span<const int> ids);
  // Counts one document (the caller appends the separating end-of-sequence id itself).
  void end_document() { ++documents_; }
  // Commits the .bin and writes the .json. Throws moe4d::Error if no token was appended.
  TokenShardHeader finish();

  int64_t num_tokens() const { return num_tokens_; }
  const TokenShardPaths& paths() const { return paths_; }

 private:
  TokenShardPaths paths_;
  int64_t vocab_size_;
  std::string tokenizer_spec_;
  std::optional<TokenizerIdentity> identity_;
  TokenDType dtype_;
  AtomicFile bin_;
  Sha256 sha_;
  std::vector<unsigned char> staging_;
  int64_t num_tokens_ = 0;
  int64_t documents_ = 0;
  bool finished_ = false;
};

// One-shot form of TokenShardWriter: writes `ids` holding `documents` documents.
TokenShardHeader write_token_shard(const std::string& path, std::span<const int> ids, int64_t vocab_size,
                                   const std::string& tokenizer_spec, int64_t documents,
                                   std::optional<TokenizerIdentity> identity = std::nullopt);

}  // namespace moe4d
