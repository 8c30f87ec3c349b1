// tests/data/hf_tokenizer_encode.cc — moe4d's side of tests/data/hf_tokenizer_reference.py:
//   hf_tokenizer_encode TOKENIZER TEXTS.json OUT.json
// encodes each string of TEXTS.json with load_tokenizer(TOKENIZER) and writes
// {"ids": [[...], ...], "decoded": [decode(ids), ...], "eos_id", "vocab_size"};
//   hf_tokenizer_encode --nfc TEXTS.json OUT.json
// writes {"nfc": [unicode::nfc(text), ...]};
//   hf_tokenizer_encode --categories OUT.txt
// writes the general-category class letter (LMNPSZC) of every code point 0..0x10FFFF.
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/tokenizer.h"
#include "data/unicode_text.h"

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--categories") {
    std::string letters;
    for (char32_t cp = 0; cp < 0x110000; ++cp) letters += "LMNPSZC"[static_cast<int>(moe4d::unicode::category(cp))];
    std::ofstream(argv[2]) << letters;
    return 0;
  }
  if (argc != 4) {
    std::cerr << "usage: hf_tokenizer_encode TOKENIZER TEXTS.json OUT.json\n";
    return 2;
  }
  try {
    std::ifstream in(argv[2]);
    const nlohmann::json texts = nlohmann::json::parse(in);
    if (std::string(argv[1]) == "--nfc") {
      nlohmann::json out = {{"nfc", nlohmann::json::array()}};
      for (const auto& t : texts)
        out["nfc"].push_back(moe4d::unicode::encode_utf8(moe4d::unicode::nfc(moe4d::unicode::decode_utf8(t.get<std::string>()))));
      std::ofstream(argv[3]) << out.dump() << "\n";
      return 0;
    }
    const auto tokenizer = moe4d::load_tokenizer(argv[1]);
    nlohmann::json out = {{"ids", nlohmann::json::array()}, {"decoded", nlohmann::json::array()},
                          {"eos_id", tokenizer->eos_id()}, {"vocab_size", tokenizer->vocab_size()}};
    for (const auto& t : texts) {
      const std::string text = t.get<std::string>();
      const std::vector<int> ids = tokenizer->encode(text);
      out["ids"].push_back(ids);
      out["decoded"].push_back(tokenizer->decode(ids));
    }
    std::ofstream(argv[3]) << out.dump() << "\n";
  } catch (const moe4d::Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
