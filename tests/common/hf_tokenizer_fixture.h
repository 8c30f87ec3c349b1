// tests/common/hf_tokenizer_fixture.h — a tiny hand-written Hugging Face tokenizer.json (byte-level
// BPE, Qwen2's pre-tokenizer regex and NFC) for the C++ tests; the Python reference test
// (tests/data/hf_tokenizer_reference.py) trains larger ones.
//
// Ids: 0..255 the byte characters (byte b is id b), then the merges' results
// "Ġ t" -> 256 "Ġt", "h e" -> 257 "he", "Ġt he" -> 258 "Ġthe", "i n" -> 259 "in";
// added tokens 260 <|endoftext|> (special), 261 <|im_start|> (special), 262 <think> (not special).
#pragma once

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace moe4d::test {

inline std::string byte_level_string(unsigned char b) {
  // GPT-2's map: printable bytes stand for themselves, the others map to U+0100 onwards in order.
  auto printable = [](int x) { return (x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE; };
  int cp = b;
  if (!printable(b)) {
    cp = 0x100;
    for (int x = 0; x < b; ++x) cp += printable(x) ? 0 : 1;
  }
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

inline nlohmann::json tiny_hf_tokenizer() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level_string(static_cast<unsigned char>(b))] = b;
  const std::string G = byte_level_string(' ');  // "Ġ"
  vocab[G + "t"] = 256;
  vocab["he"] = 257;
  vocab[G + "the"] = 258;
  vocab["in"] = 259;
  const std::string qwen2 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  auto added = [](int id, const char* content, bool special) {
    return nlohmann::json{{"id", id},          {"content", content}, {"single_word", false}, {"lstrip", false},
                          {"rstrip", false},   {"normalized", false}, {"special", special}};
  };
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", {added(260, "<|endoftext|>", true), added(261, "<|im_start|>", true), added(262, "<think>", false)}},
          {"normalizer", {{"type", "NFC"}}},
          {"pre_tokenizer",
           {{"type", "Sequence"},
            {"pretokenizers",
             {{{"type", "Split"}, {"pattern", {{"Regex", qwen2}}}, {"behavior", "Isolated"}, {"invert", false}},
              {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}}}}},
          {"post_processor", nullptr},
          {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", ""},
            {"end_of_word_suffix", ""},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"ignore_merges", false},
            {"vocab", vocab},
            {"merges", {G + " t", "h e", nlohmann::json::array({G + "t", "he"}), "i n"}}}}};
}

inline void write_json(const std::string& path, const nlohmann::json& j) { std::ofstream(path) << j.dump(1); }

}  // namespace moe4d::test
