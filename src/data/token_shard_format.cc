// data/token_shard_format.cc — token shard header (de)serialisation and validation.
#include "data/token_shard_format.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/sha256.h"

namespace moe4d {
namespace {

constexpr std::array<const char*, 8> kHeaderKeys = {"format",     "version",   "dtype",  "num_tokens",
                                                    "vocab_size", "tokenizer", "sha256", "documents"};
constexpr const char* kIdentityKey = "tokenizer_identity";  // optional: older shards lack it

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

int64_t integer_field(const nlohmann::json& header, const char* key, const std::string& json_path) {
  const nlohmann::json& value = header.at(key);
  if (!value.is_number_integer())
    fail("token shard header {}: \"{}\" is {}, expected an integer", json_path, key, value.dump());
  // An unsigned value past INT64_MAX would wrap to a negative number: quote it as written.
  if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    fail("token shard header {}: \"{}\" is {}, more than 2^63 - 1", json_path, key, value.dump());
  return value.get<int64_t>();
}

std::string string_field(const nlohmann::json& header, const char* key, const std::string& json_path) {
  const nlohmann::json& value = header.at(key);
  if (!value.is_string()) fail("token shard header {}: \"{}\" is {}, expected a string", json_path, key, value.dump());
  return value.get<std::string>();
}

bool is_lower_hex(const std::string& s) {
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

const char* token_dtype_name(TokenDType dtype) { return dtype == TokenDType::kUint16 ? "uint16" : "uint32"; }

size_t token_dtype_size(TokenDType dtype) { return dtype == TokenDType::kUint16 ? 2 : 4; }

TokenDType token_dtype_for_vocab(int64_t vocab_size) {
  return vocab_size <= 65536 ? TokenDType::kUint16 : TokenDType::kUint32;
}

TokenShardPaths token_shard_paths(const std::string& path) {
  std::string stem = path;
  if (ends_with(stem, ".bin") || ends_with(stem, ".json")) stem = stem.substr(0, stem.rfind('.'));
  return {stem, stem + ".bin", stem + ".json"};
}

std::string token_shard_header_json(const TokenShardHeader& header) {
  nlohmann::ordered_json json;
  json["format"] = kTokenShardFormat;
  json["version"] = kTokenShardVersion;
  json["dtype"] = token_dtype_name(header.dtype);
  json["num_tokens"] = header.num_tokens;
  json["vocab_size"] = header.vocab_size;
  json["tokenizer"] = header.tokenizer;
  json["sha256"] = header.sha256;
  json["documents"] = header.documents;
  if (header.tokenizer_identity) json[kIdentityKey] = tokenizer_identity_json(*header.tokenizer_identity);
  return json.dump(2) + "\n";
}

std::string read_token_shard_header_text(const std::string& json_path) {
  std::error_code ec;
  if (!std::filesystem::exists(json_path, ec))
    fail("token shard header {} not found (every .bin needs the .json that `moe4d prepare` writes next to it)",
         json_path);
  if (std::filesystem::is_directory(json_path, ec))
    fail("token shard header {} is a directory, expected the .json that `moe4d prepare` writes", json_path);
  std::ifstream in(json_path, std::ios::binary);
  if (!in) fail("cannot read token shard header {}", json_path);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail("cannot read token shard header {}: read error", json_path);
  return text.str();
}

TokenShardHeader read_token_shard_header(const std::string& json_path) {
  return parse_token_shard_header(read_token_shard_header_text(json_path), json_path);
}

TokenShardHeader parse_token_shard_header(const std::string& text, const std::string& json_path) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for a number overflow
    fail("token shard header {} is not valid JSON: {}", json_path, e.what());
  }
  if (!json.is_object()) fail("token shard header {} is {}, expected a JSON object", json_path, json.type_name());
  for (auto it = json.begin(); it != json.end(); ++it) {
    if (it.key() == kIdentityKey) continue;
    if (std::find_if(kHeaderKeys.begin(), kHeaderKeys.end(), [&](const char* k) { return it.key() == k; }) ==
        kHeaderKeys.end())
      fail(
          "token shard header {}: unknown key \"{}\" (expected format, version, dtype, num_tokens, vocab_size, "
          "tokenizer, sha256, documents, tokenizer_identity)",
          json_path, it.key());
  }
  for (const char* key : kHeaderKeys)
    if (!json.contains(key)) fail("token shard header {}: missing key \"{}\"", json_path, key);

  std::string format = string_field(json, "format", json_path);
  if (format != kTokenShardFormat)
    fail("token shard header {}: format is \"{}\", expected \"{}\"", json_path, format, kTokenShardFormat);
  int64_t version = integer_field(json, "version", json_path);
  if (version != kTokenShardVersion)
    fail("token shard header {}: version {} is not supported (expected {})", json_path, version, kTokenShardVersion);

  TokenShardHeader header;
  std::string dtype = string_field(json, "dtype", json_path);
  if (dtype == "uint16") {
    header.dtype = TokenDType::kUint16;
  } else if (dtype == "uint32") {
    header.dtype = TokenDType::kUint32;
  } else {
    fail("token shard header {}: dtype \"{}\" is not supported (expected \"uint16\" or \"uint32\")", json_path, dtype);
  }
  header.num_tokens = integer_field(json, "num_tokens", json_path);
  if (header.num_tokens <= 0)
    fail("token shard header {}: num_tokens is {}, expected > 0", json_path, header.num_tokens);
  // num_tokens * itemsize must be a byte count (and a file size): at most 2^62 bytes.
  if (static_cast<uint64_t>(header.num_tokens) > (uint64_t{1} << 62) / token_dtype_size(header.dtype))
    fail("token shard header {}: num_tokens is {}, more {} tokens than a file can hold", json_path, header.num_tokens,
         dtype);
  header.vocab_size = integer_field(json, "vocab_size", json_path);
  if (header.vocab_size <= 0 || header.vocab_size > (int64_t{1} << 31))
    fail("token shard header {}: vocab_size is {}, expected 1..2^31", json_path, header.vocab_size);
  if (header.dtype == TokenDType::kUint16 && header.vocab_size > 65536)
    fail("token shard header {}: dtype uint16 cannot hold vocab_size {} (expected uint32 for vocabularies > 65536)",
         json_path, header.vocab_size);
  header.tokenizer = string_field(json, "tokenizer", json_path);
  header.sha256 = string_field(json, "sha256", json_path);
  if (header.sha256.size() != 64 || !is_lower_hex(header.sha256))
    fail("token shard header {}: sha256 \"{}\" is not 64 lowercase hex digits", json_path, header.sha256);
  header.documents = integer_field(json, "documents", json_path);
  if (header.documents < 0) fail("token shard header {}: documents is {}, expected >= 0", json_path, header.documents);
  if (json.contains(kIdentityKey))
    header.tokenizer_identity = parse_tokenizer_identity(json[kIdentityKey], "token shard header " + json_path);
  return header;
}

namespace {

// ids [0, count) of one little-endian chunk; counts those >= vocab_size and remembers the first.
// The count is a branch-free loop the compiler vectorises; only a chunk with bad ids is searched.
template <typename T>
void scan_ids(const unsigned char* chunk, size_t count, int64_t base, int64_t vocab_size, TokenPayloadCheck& out) {
  const uint64_t limit = static_cast<uint64_t>(vocab_size);
  int64_t bad = 0;
  for (size_t i = 0; i < count; ++i) {
    T id;
    std::memcpy(&id, chunk + i * sizeof(T), sizeof(T));
    bad += static_cast<uint64_t>(id) >= limit;
  }
  if (bad == 0) return;
  if (out.out_of_vocab == 0) {
    for (size_t i = 0; i < count; ++i) {
      T id;
      std::memcpy(&id, chunk + i * sizeof(T), sizeof(T));
      if (static_cast<uint64_t>(id) >= limit) {
        out.first_bad_index = base + static_cast<int64_t>(i);
        out.first_bad_id = id;
        break;
      }
    }
  }
  out.out_of_vocab += bad;
}

}  // namespace

TokenPayloadCheck scan_token_payload(const unsigned char* data, size_t bytes, TokenDType dtype, int64_t vocab_size,
                                     const std::function<void(size_t, size_t)>& done) {
  // 1 MiB chunks: the ids are scanned while the chunk the hash just read is still in cache.
  constexpr size_t kChunk = size_t{1} << 20;
  const size_t item = token_dtype_size(dtype);
  TokenPayloadCheck out;
  Sha256 hash;
  for (size_t offset = 0; offset < bytes; offset += kChunk) {
    const size_t n = std::min(kChunk, bytes - offset);
    hash.update(data + offset, n);
    const int64_t base = static_cast<int64_t>(offset / item);
    if (dtype == TokenDType::kUint16) scan_ids<uint16_t>(data + offset, n / item, base, vocab_size, out);
    else scan_ids<uint32_t>(data + offset, n / item, base, vocab_size, out);
    if (done) done(offset, n);
  }
  out.sha256 = hash.hex_digest();
  return out;
}

}  // namespace moe4d
