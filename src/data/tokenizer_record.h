// data/tokenizer_record.h — what token files record about their tokenizer, and checking that the
// inputs of a run agree on it.
//
// moe4d shards record the identity (data/tokenizer_identity.h) in their .json header; Megatron
// datasets written by `moe4d prepare` in the sidecar <prefix>.tokenizer.json beside
// <prefix>.bin/.idx (Megatron's own files have no room for it, and Megatron ignores the sidecar).
// Files written before identities were recorded carry none: they are "unrecorded" and can only be
// warned about, not checked.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "data/tokenizer_identity.h"
#include "data/token_source.h"

namespace moe4d {

inline constexpr const char* kTokenizerSidecarFormat = "moe4d-tokenizer-sidecar";
inline constexpr const char* kTokenizerSidecarSuffix = ".tokenizer.json";

// The Megatron sidecar of a dataset prefix (any of prefix, .bin, .idx): "<prefix>.tokenizer.json".
std::string megatron_tokenizer_sidecar_path(const std::string& path);
// Writes the sidecar atomically: {"format", "version": 1, "tokenizer": spec, "tokenizer_identity"}.
void write_megatron_tokenizer_sidecar(const std::string& prefix, const std::string& tokenizer_spec,
                                      const TokenizerIdentity& identity);

// What the files of one token source record about their tokenizer.
struct RecordedTokenizer {
  std::string file;                           // the header or sidecar read (the .idx if it has no sidecar)
  std::string spec;                           // the tokenizer spec it names (resolved), may be empty
  std::optional<TokenizerIdentity> identity;  // empty: made before identities were recorded
};

// The sidecar of a Megatron dataset, if there is one (a malformed one is a moe4d::Error naming it).
std::optional<RecordedTokenizer> read_megatron_tokenizer_sidecar(const std::string& path);

// Reads only headers (cheap): a moe4d source's .json (every numbered shard's), a Megatron source's
// sidecar. One entry per file. A missing header is left to the full open to report; a dataset
// without a sidecar is an unrecorded entry naming its .idx.
std::vector<RecordedTokenizer> read_recorded_tokenizers(const std::string& path, TokenFormat format);

// One input of a run that names a tokenizer, and what it says: `says` names the key and the file,
// e.g. "data.train /d/train.json was made with", "data.tokenizer /d/tokenizer.model is".
struct TokenizerWitness {
  std::string says;
  TokenizerIdentity identity;
};

// Throws moe4d::Error with one line naming both sides of the first pair that disagrees
// (every witness is compared with the first).
void check_tokenizers_agree(const std::vector<TokenizerWitness>& witnesses);

}  // namespace moe4d
