// data/token_dataset.h — a read-only, memory-mapped token shard (format: data/token_shard_format.h).
//
// open() validates the header (present, well-formed, num_tokens representable) and that the .bin is
// exactly num_tokens * itemsize bytes. With verify=true (the default) it also makes one streaming
// pass over the .bin (scan_token_payload): its SHA-256 must match the header and every id must be
// < vocab_size. A shard that passed is marked by `<stem>.bin.verified` (keyed by the .bin's size,
// mtime and inode and the header's hash), so a multi-GB shard is hashed once, not at every open;
// the marker is best effort (a read-only directory only costs the pass again). Independently of
// verify, read() rejects any id >= vocab_size it copies, so a corrupt id can never reach the
// embedding.
//
// Every failure is a moe4d::Error with one line naming the file. Move-only; the mapping is shared
// read-only, so concurrent const calls are safe.
#pragma once

#include <cstdint>
#include <string>

#include "data/token_shard_format.h"

namespace moe4d {

class TokenDataset {
 public:
  // `path`: the .bin, the .json or their common stem.
  static TokenDataset open(const std::string& path, bool verify = true);

  ~TokenDataset();
  TokenDataset(TokenDataset&& other) noexcept;
  TokenDataset& operator=(TokenDataset&& other) noexcept;
  TokenDataset(const TokenDataset&) = delete;
  TokenDataset& operator=(const TokenDataset&) = delete;

  int64_t num_tokens() const { return header_.num_tokens; }
  int64_t vocab_size() const { return header_.vocab_size; }
  int64_t num_documents() const { return header_.documents; }
  TokenDType dtype() const { return header_.dtype; }
  const TokenShardHeader& header() const { return header_; }
  const TokenShardPaths& paths() const { return paths_; }
  // The header's tokenizer as a load_tokenizer() spec: a relative path is resolved against the
  // directory of the .json.
  std::string tokenizer_spec() const;

  // Copies ids [offset, offset + count) into `out`. Offsets out of range are a caller bug (CHECK);
  // an id >= vocab_size is a moe4d::Error naming the file and the index.
  void read(int64_t offset, int64_t count, int32_t* out) const;
  int32_t token(int64_t index) const;

  // Full pass over the ids: throws moe4d::Error naming the file, the number of ids >= vocab_size
  // and the first of them.
  void validate_tokens() const;
  // Throws moe4d::Error naming the file if the .bin's SHA-256 differs from the header's.
  void verify_checksum() const;
  // Both checks in one pass (what open() runs).
  void verify_payload() const;

 private:
  TokenDataset() = default;
  void release();
  void report_sha256(const std::string& actual) const;
  void report_out_of_vocab(const TokenPayloadCheck& check) const;

  TokenShardPaths paths_;
  TokenShardHeader header_;
  const unsigned char* data_ = nullptr;  // mmap of the whole .bin
  size_t mapped_bytes_ = 0;
};

}  // namespace moe4d
