// data/tokenizer_record.cc — tokenizer identities as token files record them; agreement check.
#include "data/tokenizer_record.h"

#include <filesystem>

#include "core/error.h"
#include "data/atomic_file.h"
#include "data/megatron_indexed_dataset.h"
#include "data/token_shard_format.h"

namespace moe4d {
namespace fs = std::filesystem;
namespace {

// A header's relative tokenizer path is relative to the header's directory (a prepared directory
// moves as a whole).
std::string resolve_spec(const std::string& spec, const std::string& file) {
  if (spec == "bytes" || spec.empty() || fs::path(spec).is_absolute()) return spec;
  return (fs::path(file).parent_path() / spec).string();
}

RecordedTokenizer read_moe4d_header(const std::string& path) {
  const std::string json = token_shard_paths(path).json;
  const TokenShardHeader header = read_token_shard_header(json);
  return {json, resolve_spec(header.tokenizer, json), header.tokenizer_identity};
}

RecordedTokenizer read_sidecar(const std::string& prefix) {
  const std::string file = megatron_tokenizer_sidecar_path(prefix);
  std::error_code ec;
  if (!fs::exists(file, ec)) return {prefix + ".idx", "", std::nullopt};  // e.g. a dataset Megatron wrote
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(read_token_shard_header_text(file));
  } catch (const nlohmann::json::exception& e) {
    fail("tokenizer sidecar {} is not valid JSON: {}", file, e.what());
  }
  if (!json.is_object() || json.value("format", "") != kTokenizerSidecarFormat)
    fail("tokenizer sidecar {}: expected a JSON object with \"format\": \"{}\"", file, kTokenizerSidecarFormat);
  if (!json.contains("version") || json["version"] != 1)
    fail("tokenizer sidecar {}: version {} is not supported (expected 1)", file,
         json.contains("version") ? json["version"].dump() : std::string("missing"));
  if (!json.contains("tokenizer") || !json["tokenizer"].is_string())
    fail("tokenizer sidecar {}: \"tokenizer\" is missing or not a string", file);
  if (!json.contains("tokenizer_identity")) fail("tokenizer sidecar {}: \"tokenizer_identity\" is missing", file);
  return {file, resolve_spec(json["tokenizer"].get<std::string>(), file),
          parse_tokenizer_identity(json["tokenizer_identity"], "tokenizer sidecar " + file)};
}

bool single_exists(const std::string& path, TokenFormat format) {
  std::error_code ec;
  if (format == TokenFormat::kMegatron) return fs::exists(megatron_prefix(path) + ".idx", ec);
  return fs::exists(token_shard_paths(path).json, ec);
}

}  // namespace

std::string megatron_tokenizer_sidecar_path(const std::string& path) {
  return megatron_prefix(path) + kTokenizerSidecarSuffix;
}

void write_megatron_tokenizer_sidecar(const std::string& prefix, const std::string& tokenizer_spec,
                                      const TokenizerIdentity& identity) {
  nlohmann::ordered_json json;
  json["format"] = kTokenizerSidecarFormat;
  json["version"] = 1;
  json["tokenizer"] = tokenizer_spec;
  json["tokenizer_identity"] = tokenizer_identity_json(identity);
  write_file_atomically(megatron_tokenizer_sidecar_path(prefix), json.dump(2) + "\n");
}

std::optional<RecordedTokenizer> read_megatron_tokenizer_sidecar(const std::string& path) {
  RecordedTokenizer recorded = read_sidecar(megatron_prefix(path));
  if (!recorded.identity) return std::nullopt;
  return recorded;
}

std::vector<RecordedTokenizer> read_recorded_tokenizers(const std::string& path, TokenFormat format) {
  auto read_one = [&](const std::string& p) {
    return format == TokenFormat::kMegatron ? read_sidecar(megatron_prefix(p)) : read_moe4d_header(p);
  };
  if (single_exists(path, format)) return {read_one(path)};
  const std::string stem = format == TokenFormat::kMegatron ? megatron_prefix(path) : token_shard_paths(path).stem;
  std::vector<RecordedTokenizer> out;
  for (int64_t i = 0; single_exists(numbered_shard_stem(stem, i), format); ++i)
    out.push_back(read_one(numbered_shard_stem(stem, i)));
  return out;
}

void check_tokenizers_agree(const std::vector<TokenizerWitness>& witnesses) {
  if (witnesses.empty()) return;
  const TokenizerWitness& first = witnesses.front();
  for (const TokenizerWitness& other : witnesses) {
    if (other.identity == first.identity) continue;
    fail("tokenizer mismatch: {} tokenizer ({}), but {} ({}); expected one tokenizer for all of them (data.tokenizer, "
         "the shards of data.train and data.valid, the checkpoint)",
         other.says, other.identity.describe(), first.says, first.identity.describe());
  }
}

}  // namespace moe4d
