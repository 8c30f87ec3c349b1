// data/tokenizer_identity.h — which tokenizer a token file was made with.
//
// A tokenizer's identity is its kind ("bytes", "sentencepiece" or "huggingface"), the SHA-256 of its
// file (.model or tokenizer.json; empty for bytes, whose vocabulary is fixed) and its vocabulary size. `moe4d prepare` records it
// in every moe4d shard header (data/token_shard_format.h, key "tokenizer_identity") and, for the
// Megatron format, in a sidecar file (data/tokenizer_record.h); training checks that its inputs
// agree on it before it starts.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace moe4d {

class Tokenizer;

struct TokenizerIdentity {
  std::string kind;    // "bytes" | "sentencepiece" | "huggingface"
  std::string sha256;  // lowercase hex of the .model / tokenizer.json file; empty for bytes
  int64_t vocab_size = 0;

  // Same tokenizer: same kind, same model file, same vocabulary.
  bool operator==(const TokenizerIdentity&) const = default;
  // "sentencepiece, 4096 ids, model sha256 3f2a19c07b1e" (the first 12 hex digits) / "bytes, 257 ids".
  std::string describe() const;
};

// The identity of a load_tokenizer() spec: "bytes", or a tokenizer file (loaded to learn its
// vocabulary, hashed). Throws moe4d::Error naming the spec if it cannot be loaded.
TokenizerIdentity tokenizer_identity_of(const std::string& spec);
// The same for a loaded tokenizer (its spec() is hashed; nothing is loaded again).
TokenizerIdentity tokenizer_identity_of(const Tokenizer& tokenizer);

// {"kind": ..., "sha256": ... (files only), "vocab_size": ...}
nlohmann::ordered_json tokenizer_identity_json(const TokenizerIdentity& identity);
// The inverse; throws moe4d::Error "<where>: ..." for a malformed object.
TokenizerIdentity parse_tokenizer_identity(const nlohmann::json& json, const std::string& where);

}  // namespace moe4d
