// data/token_shard_writer.cc — TokenShardWriter: little-endian ids, running SHA-256, atomic commit.
#include "data/token_shard_writer.h"

#include <bit>
#include <cstring>

#include "core/check.h"
#include "core/error.h"

namespace moe4d {
namespace {

// Shards are defined as little-endian and the reader memory-maps them as native integers.
static_assert(std::endian::native == std::endian::little, "token shards assume a little-endian host");

int64_t checked_vocab(int64_t vocab_size, const std::string& path) {
  if (vocab_size <= 0) fail("token shard {}: vocab_size is {}, expected > 0", path, vocab_size);
  return vocab_size;
}

}  // namespace

TokenShardWriter::TokenShardWriter(const std::string& path, int64_t vocab_size, std::string tokenizer_spec,
                                   std::optional<TokenizerIdentity> identity)
    : paths_(token_shard_paths(path)),
      vocab_size_(checked_vocab(vocab_size, path)),
      tokenizer_spec_(std::move(tokenizer_spec)),
      identity_(std::move(identity)),
      dtype_(token_dtype_for_vocab(vocab_size)),
      bin_(paths_.bin) {}

void TokenShardWriter::append(std::span<const int> ids) {
  MOE4D_CHECK(!finished_);
  const size_t item = token_dtype_size(dtype_);
  staging_.resize(ids.size() * item);
  for (size_t i = 0; i < ids.size(); ++i) {
    int id = ids[i];
    if (id < 0 || id >= vocab_size_)
      fail("token shard {}: token id {} at position {} is outside the vocabulary [0, {})", paths_.bin, id,
           num_tokens_ + static_cast<int64_t>(i), vocab_size_);
    if (dtype_ == TokenDType::kUint16) {
      uint16_t v = static_cast<uint16_t>(id);
      std::memcpy(&staging_[i * item], &v, item);
    } else {
      uint32_t v = static_cast<uint32_t>(id);
      std::memcpy(&staging_[i * item], &v, item);
    }
  }
  bin_.write(staging_.data(), staging_.size());
  sha_.update(staging_.data(), staging_.size());
  num_tokens_ += static_cast<int64_t>(ids.size());
}

TokenShardHeader TokenShardWriter::finish() {
  MOE4D_CHECK(!finished_);
  if (num_tokens_ == 0) fail("token shard {} would be empty: no tokens were written", paths_.bin);
  finished_ = true;
  TokenShardHeader header;
  header.dtype = dtype_;
  header.num_tokens = num_tokens_;
  header.vocab_size = vocab_size_;
  header.tokenizer = tokenizer_spec_;
  header.sha256 = sha_.hex_digest();
  header.documents = documents_;
  header.tokenizer_identity = identity_;
  bin_.commit();
  write_file_atomically(paths_.json, token_shard_header_json(header));
  return header;
}

TokenShardHeader write_token_shard(const std::string& path, std::span<const int> ids, int64_t vocab_size,
                                   const std::string& tokenizer_spec, int64_t documents,
                                   std::optional<TokenizerIdentity> identity) {
  TokenShardWriter writer(path, vocab_size, tokenizer_spec, std::move(identity));
  writer.append(ids);
  for (int64_t d = 0; d < documents; ++d) writer.end_document();
  return writer.finish();
}

}  // namespace moe4d
