// data/token_source.cc — opening moe4d / Megatron shards, and numbered shards as one stream.
#include "data/token_source.h"

#include <algorithm>
#include <filesystem>

#include "core/check.h"
#include "core/error.h"
#include "data/megatron_indexed_dataset.h"

namespace moe4d {
namespace fs = std::filesystem;
namespace {

class OwnedTokenDataset final : public TokenSource {
 public:
  explicit OwnedTokenDataset(TokenDataset dataset) : dataset_(std::move(dataset)) {}
  int64_t num_tokens() const override { return dataset_.num_tokens(); }
  int64_t num_documents() const override { return dataset_.num_documents(); }
  int64_t vocab_size() const override { return dataset_.vocab_size(); }
  std::string name() const override { return dataset_.paths().bin; }
  void read(int64_t offset, int64_t count, int32_t* out) const override { dataset_.read(offset, count, out); }
  std::string tokenizer_spec() const override { return dataset_.tokenizer_spec(); }

 private:
  TokenDataset dataset_;
};

// Shards back to back; a read that crosses a boundary is served by both.
class ConcatenatedTokenSource final : public TokenSource {
 public:
  explicit ConcatenatedTokenSource(std::vector<std::unique_ptr<TokenSource>> parts) : parts_(std::move(parts)) {
    for (const auto& p : parts_) {
      starts_.push_back(total_);
      total_ += p->num_tokens();
      documents_ += p->num_documents();
      vocab_ = std::max(vocab_, p->vocab_size());
    }
  }
  int64_t num_tokens() const override { return total_; }
  int64_t num_documents() const override { return documents_; }
  int64_t vocab_size() const override { return vocab_; }
  std::string name() const override { return parts_.front()->name(); }
  std::string tokenizer_spec() const override { return parts_.front()->tokenizer_spec(); }
  void read(int64_t offset, int64_t count, int32_t* out) const override {
    MOE4D_CHECK(offset >= 0 && count >= 0 && offset + count <= total_);
    size_t part = std::upper_bound(starts_.begin(), starts_.end(), offset) - starts_.begin() - 1;
    while (count > 0) {
      const int64_t local = offset - starts_[part];
      const int64_t n = std::min(count, parts_[part]->num_tokens() - local);
      parts_[part]->read(local, n, out);
      out += n, offset += n, count -= n;
      ++part;
    }
  }

 private:
  std::vector<std::unique_ptr<TokenSource>> parts_;
  std::vector<int64_t> starts_;
  int64_t total_ = 0, documents_ = 0, vocab_ = 0;
};

bool single_shard_exists(const std::string& path, TokenFormat format) {
  std::error_code ec;
  if (format == TokenFormat::kMegatron) return fs::exists(megatron_prefix(path) + ".idx", ec);
  return fs::exists(token_shard_paths(path).json, ec);
}

std::unique_ptr<TokenSource> open_single(const std::string& path, TokenFormat format, int64_t id_limit) {
  if (format == TokenFormat::kMegatron) return std::make_unique<MegatronIndexedDataset>(path, id_limit);
  return std::make_unique<OwnedTokenDataset>(TokenDataset::open(path));
}

}  // namespace

TokenFormat parse_token_format(const std::string& name, const std::string& what) {
  if (name == "moe4d") return TokenFormat::kMoe4d;
  if (name == "megatron") return TokenFormat::kMegatron;
  fail("{}: format \"{}\" is not supported (expected moe4d or megatron)", what, name);
}

std::string numbered_shard_stem(const std::string& stem, int64_t index) {
  return fmt::format("{}-{:05d}", stem, index);
}

std::unique_ptr<TokenSource> open_token_source(const std::string& path, TokenFormat format, int64_t id_limit) {
  if (single_shard_exists(path, format)) return open_single(path, format, id_limit);
  const std::string stem = format == TokenFormat::kMegatron ? megatron_prefix(path) : token_shard_paths(path).stem;
  std::vector<std::unique_ptr<TokenSource>> parts;
  for (int64_t i = 0; single_shard_exists(numbered_shard_stem(stem, i), format); ++i)
    parts.push_back(open_single(numbered_shard_stem(stem, i), format, id_limit));
  if (parts.empty()) {
    if (format == TokenFormat::kMegatron)
      fail("Megatron dataset {} not found (looked for {}.idx/.bin and {}-00000.idx)", path, stem, stem);
    // The single-shard error names exactly what is missing or wrong.
    return open_single(path, format, id_limit);
  }
  if (parts.size() == 1) return std::move(parts.front());
  return std::make_unique<ConcatenatedTokenSource>(std::move(parts));
}

TokenSourceStats token_source_stats(const std::string& path, TokenFormat format, int64_t id_limit) {
  TokenSourceStats stats;
  auto add = [&](const std::string& shard) {
    ++stats.files;
    if (format == TokenFormat::kMegatron) {
      const MegatronIndexedDataset dataset(shard, id_limit);
      stats.tokens += dataset.num_tokens();
      stats.documents += dataset.num_documents();
    } else {
      const TokenShardHeader header = read_token_shard_header(token_shard_paths(shard).json);
      stats.tokens += header.num_tokens;
      stats.documents += header.documents;
    }
  };
  if (single_shard_exists(path, format)) {
    add(path);
    return stats;
  }
  const std::string stem = format == TokenFormat::kMegatron ? megatron_prefix(path) : token_shard_paths(path).stem;
  for (int64_t i = 0; single_shard_exists(numbered_shard_stem(stem, i), format); ++i) add(numbered_shard_stem(stem, i));
  return stats;
}

}  // namespace moe4d
