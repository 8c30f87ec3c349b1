// tests/fuzz/fuzz_hf_tokenizer.cc — libFuzzer target for the Hugging Face tokenizer.json reader
// (data/hf_tokenizer.h) and the pre-tokenizer regex compiler it runs on the file's patterns
// (data/pretokenizer_regex.h).
//
// The first byte picks the reader: even — the rest is a tokenizer.json (written to a scratch file,
// as the tokenizer is loaded by path); odd — the rest is a Split pattern, compiled and run over a
// fixed mixed text. Either the input is accepted and then behaves (ids inside the vocabulary,
// decode of those ids does not throw, matches inside the text), or it is refused with one
// moe4d::Error; nothing else (a crash, another exception) is acceptable.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

#include "core/error.h"
#include "data/hf_tokenizer.h"
#include "data/pretokenizer_regex.h"

namespace {
const std::u32string kText = U"Hello, world! It's 2026: 中文 ŝ\t\n  x_y 123456 'LL 🤗\r\n";
const char kUtf8Text[] = "Hello, world! It's 2026: \xe4\xb8\xad\xe6\x96\x87 <|endoftext|>  123456 \xff\xfe \xf0\x9f\xa4\x97\n";

void tokenizer(std::string_view json) {
  static const std::string path = "/tmp/fuzz_hf_tokenizer." + std::to_string(getpid()) + ".json";
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(json.data(), static_cast<std::streamsize>(json.size()));
  try {
    const moe4d::HfTokenizer tok(path);
    const std::vector<int> ids = tok.encode(kUtf8Text);
    for (int id : ids)
      if (id < 0 || id >= tok.vocab_size()) std::abort();
    if (tok.eos_id() < 0 || tok.eos_id() >= tok.vocab_size()) std::abort();
    (void)tok.decode(ids);
  } catch (const moe4d::Error&) {
  }
}

void pattern(std::string_view text) {
  try {
    const moe4d::PretokenizerRegex regex(text);
    size_t from = 0;
    while (const auto match = regex.find(kText, from)) {
      if (match->first < from || match->second <= match->first || match->second > kText.size()) std::abort();
      from = match->second;
    }
  } catch (const moe4d::Error&) {
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) tokenizer(rest);
  else pattern(rest);
  return 0;
}
