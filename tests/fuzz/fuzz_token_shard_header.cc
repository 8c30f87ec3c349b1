// Fuzzes the token shard header reader (data/token_shard_format.h) and the payload scan. Contract:
// moe4d::Error or a header whose JSON form reads back to the same header; the payload scan of the
// raw input never reads out of bounds and counts ids consistently.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "data/token_shard_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const moe4d::TokenShardHeader h = moe4d::parse_token_shard_header(text, "fuzz.json");
    const moe4d::TokenShardHeader back =
        moe4d::parse_token_shard_header(moe4d::token_shard_header_json(h), "fuzz.json");
    if (back.dtype != h.dtype || back.num_tokens != h.num_tokens || back.vocab_size != h.vocab_size ||
        back.tokenizer != h.tokenizer || back.sha256 != h.sha256 || back.documents != h.documents)
      std::abort();
  } catch (const moe4d::Error&) {
  }
  const size_t even = size & ~size_t{3};
  const auto wide = moe4d::scan_token_payload(data, even, moe4d::TokenDType::kUint32, 1 + (size % 70000));
  const auto narrow = moe4d::scan_token_payload(data, even, moe4d::TokenDType::kUint16, 1 + (size % 300));
  if (wide.out_of_vocab > static_cast<int64_t>(even / 4) || narrow.out_of_vocab > static_cast<int64_t>(even / 2))
    std::abort();
  return 0;
}
