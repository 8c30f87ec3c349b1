// data/sharded_token_writer.cc — rolling shards of either output format, and stale-shard cleanup.
#include "data/sharded_token_writer.h"

#include <filesystem>
#include <regex>

#include "core/error.h"
#include "data/tokenizer_record.h"

namespace moe4d {
namespace fs = std::filesystem;

ShardedTokenWriter::ShardedTokenWriter(std::string dir, std::string split, TokenFormat format, int64_t vocab_size,
                                       std::string tokenizer_spec, TokenizerIdentity identity, int64_t shard_size)
    : dir_(std::move(dir)),
      split_(std::move(split)),
      format_(format),
      vocab_size_(vocab_size),
      tokenizer_spec_(std::move(tokenizer_spec)),
      identity_(std::move(identity)),
      shard_size_(shard_size) {}

std::string ShardedTokenWriter::stem_of(int64_t shard) const {
  const std::string stem = (fs::path(dir_) / split_).string();
  return shard_size_ > 0 ? numbered_shard_stem(stem, shard) : stem;
}

std::string ShardedTokenWriter::data_path() const {
  const std::string stem = (fs::path(dir_) / split_).string();
  return shard_size_ > 0 ? stem : stem + ".bin";
}

void ShardedTokenWriter::add_document(std::span<const int> ids) {
  if (!moe4d_ && !megatron_) {
    const std::string stem = stem_of(static_cast<int64_t>(written_.size()));
    if (format_ == TokenFormat::kMegatron)
      megatron_ = std::make_unique<MegatronIndexedDatasetWriter>(stem, vocab_size_);
    else
      moe4d_ = std::make_unique<TokenShardWriter>(stem, vocab_size_, tokenizer_spec_, identity_);
  }
  if (megatron_) {
    megatron_->add_document(ids);
  } else {
    moe4d_->append(ids);
    moe4d_->end_document();
  }
  shard_tokens_ += static_cast<int64_t>(ids.size());
  tokens_ += static_cast<int64_t>(ids.size());
  ++documents_;
  if (shard_size_ > 0 && shard_tokens_ >= shard_size_) close_shard();
}

void ShardedTokenWriter::close_shard() {
  const std::string stem = stem_of(static_cast<int64_t>(written_.size()));
  if (megatron_) {
    megatron_->finish();
    write_megatron_tokenizer_sidecar(stem, tokenizer_spec_, identity_);
  }
  if (moe4d_) moe4d_->finish();
  megatron_.reset();
  moe4d_.reset();
  shard_tokens_ = 0;
  written_.push_back(stem + ".bin");
}

std::vector<std::string> ShardedTokenWriter::finish() {
  if (documents_ == 0) fail("prepare: the {} split got no documents", split_);
  if (moe4d_ || megatron_) close_shard();
  remove_stale();
  return written_;
}

void ShardedTokenWriter::remove_stale() {
  // Files of this split from an earlier run in another layout or with more shards.
  const std::regex ours(split_ + "(-[0-9]{5})?\\.(bin|json|idx|tokenizer\\.json)");
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (!std::regex_match(name, ours)) continue;
    const std::string sidecar_suffix = kTokenizerSidecarSuffix;
    const bool sidecar = name.ends_with(sidecar_suffix);
    const std::string stem = sidecar ? name.substr(0, name.size() - sidecar_suffix.size())
                                     : entry.path().stem().string();
    const std::string bin = (entry.path().parent_path() / stem).string() + ".bin";
    if (std::find(written_.begin(), written_.end(), bin) != written_.end()) {
      // Ours, unless it is the other format's header beside our .bin.
      const bool foreign = (format_ == TokenFormat::kMegatron && name.ends_with(".json") && !sidecar) ||
                           (format_ == TokenFormat::kMoe4d && (name.ends_with(".idx") || sidecar));
      if (!foreign) continue;
    }
    fs::remove(entry.path(), ec);
  }
}

}  // namespace moe4d
