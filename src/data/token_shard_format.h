// data/token_shard_format.h — the on-disk format of token shards, shared by writer and reader.
//
// A shard is two files next to each other:
//   <stem>.bin   raw little-endian token ids, uint16 when vocab_size <= 65536, else uint32;
//   <stem>.json  {"format": "moe4d-tokens", "version": 1, "dtype": "uint16"|"uint32",
//                 "num_tokens": N, "vocab_size": V, "tokenizer": "<spec>", "sha256": "<hex of .bin>",
//                 "documents": D, "tokenizer_identity": {"kind", "sha256", "vocab_size"}}
// "tokenizer_identity" (data/tokenizer_identity.h) says which tokenizer made the ids; shards written
// before moe4d recorded it lack the key and are still read (training warns that it cannot check them).
// Documents are separated (and ended) by the tokenizer's end-of-sequence id. "tokenizer" is a
// load_tokenizer() spec; a relative .model path is relative to the directory of the .json, so a
// prepared directory can be moved as a whole.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "data/tokenizer_identity.h"

namespace moe4d {

inline constexpr const char* kTokenShardFormat = "moe4d-tokens";
inline constexpr int kTokenShardVersion = 1;

enum class TokenDType { kUint16, kUint32 };

const char* token_dtype_name(TokenDType dtype);  // "uint16" / "uint32"
size_t token_dtype_size(TokenDType dtype);
// uint16 holds ids 0..65535, so it is used when vocab_size <= 65536.
TokenDType token_dtype_for_vocab(int64_t vocab_size);

// A user may name a shard by its .bin, its .json or the common stem.
struct TokenShardPaths {
  std::string stem;
  std::string bin;
  std::string json;
};
TokenShardPaths token_shard_paths(const std::string& path);

struct TokenShardHeader {
  TokenDType dtype = TokenDType::kUint16;
  int64_t num_tokens = 0;
  int64_t vocab_size = 0;
  std::string tokenizer;  // as written in the header (not resolved against the directory)
  std::string sha256;     // lowercase hex of the .bin
  int64_t documents = 0;
  std::optional<TokenizerIdentity> tokenizer_identity;  // empty: an older shard that records none
};

// Pretty-printed JSON text of the header, keys in the order listed above.
std::string token_shard_header_json(const TokenShardHeader& header);

// Reads and validates `json_path`: present, valid JSON, an object with exactly the keys above of the
// right types (tokenizer_identity optional), known format/version/dtype, num_tokens > 0, vocab_size that fits the dtype.
// Throws moe4d::Error with one line naming the file and what was wrong.
TokenShardHeader read_token_shard_header(const std::string& json_path);
// The same checks on header text already read; `json_path` names it in messages.
TokenShardHeader parse_token_shard_header(const std::string& text, const std::string& json_path);
// The text of the header file (moe4d::Error naming it if missing, a directory or unreadable).
std::string read_token_shard_header_text(const std::string& json_path);

// One streaming pass over a token payload (little-endian ids of `dtype`, `bytes` a multiple of the
// item size): its SHA-256 and the ids >= vocab_size. Reusable by any format whose payload is a flat
// id array (the first bad id is reported by index into the payload).
struct TokenPayloadCheck {
  std::string sha256;           // lowercase hex
  int64_t out_of_vocab = 0;     // ids >= vocab_size
  int64_t first_bad_index = -1;
  uint64_t first_bad_id = 0;
};
// `done(offset, bytes)`, if given, is called after each 1 MiB chunk has been read (a memory-mapped
// caller drops the chunk's pages there, so the pass stays in bounded resident memory).
TokenPayloadCheck scan_token_payload(const unsigned char* data, size_t bytes, TokenDType dtype, int64_t vocab_size,
                                     const std::function<void(size_t, size_t)>& done = {});

}  // namespace moe4d
