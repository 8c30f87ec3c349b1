// data/tokenizer_identity.cc — a tokenizer's identity and its JSON form.
#include "data/tokenizer_identity.h"

#include "core/error.h"
#include "core/sha256.h"
#include "data/tokenizer.h"

namespace moe4d {
namespace {

bool is_sha256_hex(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

std::string TokenizerIdentity::describe() const {
  if (sha256.empty()) return fmt::format("{}, {} ids", kind, vocab_size);
  return fmt::format("{}, {} ids, model sha256 {}", kind, vocab_size, sha256.substr(0, 12));
}

TokenizerIdentity tokenizer_identity_of(const std::string& spec) {
  return tokenizer_identity_of(*load_tokenizer(spec));  // names the spec if it cannot load
}

TokenizerIdentity tokenizer_identity_of(const Tokenizer& tokenizer) {
  const std::string spec = tokenizer.spec();
  if (spec == "bytes") return {"bytes", "", tokenizer.vocab_size()};
  return {is_hf_tokenizer_file(spec) ? "huggingface" : "sentencepiece", sha256_file(spec), tokenizer.vocab_size()};
}

nlohmann::ordered_json tokenizer_identity_json(const TokenizerIdentity& identity) {
  nlohmann::ordered_json json;
  json["kind"] = identity.kind;
  if (!identity.sha256.empty()) json["sha256"] = identity.sha256;
  json["vocab_size"] = identity.vocab_size;
  return json;
}

TokenizerIdentity parse_tokenizer_identity(const nlohmann::json& json, const std::string& where) {
  if (!json.is_object())
    fail("{}: \"tokenizer_identity\" is {}, expected an object {{\"kind\", \"sha256\", \"vocab_size\"}}", where,
         json.dump());
  for (auto it = json.begin(); it != json.end(); ++it)
    if (it.key() != "kind" && it.key() != "sha256" && it.key() != "vocab_size")
      fail("{}: \"tokenizer_identity\" has unknown key \"{}\" (expected kind, sha256, vocab_size)", where, it.key());
  TokenizerIdentity identity;
  if (!json.contains("kind") || !json["kind"].is_string() ||
      (json["kind"] != "bytes" && json["kind"] != "sentencepiece" && json["kind"] != "huggingface"))
    fail("{}: \"tokenizer_identity\".kind is {}, expected \"bytes\", \"sentencepiece\" or \"huggingface\"", where,
         json.contains("kind") ? json["kind"].dump() : std::string("missing"));
  identity.kind = json["kind"].get<std::string>();
  const bool file = identity.kind != "bytes";  // sentencepiece and huggingface tokenizers are files
  if (file != json.contains("sha256"))
    fail("{}: \"tokenizer_identity\" of kind {} {} \"sha256\"", where, identity.kind,
         file ? "lacks" : "must not have");
  if (file) {
    if (!json["sha256"].is_string() || !is_sha256_hex(json["sha256"].get<std::string>()))
      fail("{}: \"tokenizer_identity\".sha256 is {}, expected 64 lowercase hex digits", where, json["sha256"].dump());
    identity.sha256 = json["sha256"].get<std::string>();
  }
  if (!json.contains("vocab_size") || !json["vocab_size"].is_number_integer() || json["vocab_size"].get<int64_t>() <= 0 ||
      json["vocab_size"].get<int64_t>() > (int64_t{1} << 31))
    fail("{}: \"tokenizer_identity\".vocab_size is {}, expected an integer in 1..2^31", where,
         json.contains("vocab_size") ? json["vocab_size"].dump() : std::string("missing"));
  identity.vocab_size = json["vocab_size"].get<int64_t>();
  return identity;
}

}  // namespace moe4d
