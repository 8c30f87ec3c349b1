// tests/data/hf_tokenizer_test.cc — the Hugging Face tokenizer.json tokenizer: encoding of a
// hand-checked fixture, added tokens, NFC, invalid UTF-8, loading by content, identities, and the
// one-line refusals of what it does not support. (Equality with an independent implementation on a
// mixed corpus: tests/data/hf_tokenizer_reference.py.)
#include "data/hf_tokenizer.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "../common/hf_tokenizer_fixture.h"
#include "data/pretokenizer_regex.h"
#include "data/tokenizer_identity.h"
#include "data/unicode_text.h"
#include "data_test_util.h"

namespace moe4d {
namespace {

namespace fs = std::filesystem;
using test::expect_error;

class HfTokenizerTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("moe4d_hf_tokenizer_test_{}", getpid());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const nlohmann::json& j, const std::string& name = "tokenizer.json") {
    const std::string path = (dir_ / name).string();
    test::write_json(path, j);
    return path;
  }
  fs::path dir_;
};

TEST_F(HfTokenizerTest, EncodesWithMergesAddedTokensAndDecodes) {
  const auto tok = load_tokenizer(write(test::tiny_hf_tokenizer()));
  EXPECT_EQ(tok->vocab_size(), 263);
  EXPECT_EQ(tok->eos_id(), 260);
  // "in the" -> "in" | " the": "Ġ t" (rank 0) then "h e" then "Ġt he".
  EXPECT_EQ(tok->encode("in the"), (std::vector<int>{259, 258}));
  // Digits split one by one (Qwen2's \p{N}); "'S" is a contraction (?i:); added tokens cut first.
  EXPECT_EQ(tok->encode("42'S<|im_start|>x<think><|endoftext|>"),
            (std::vector<int>{'4', '2', '\'', 'S', 261, 'x', 262, 260}));
  // Leftmost-longest: "<|endoftext|" is not the token, and plain bytes stay bytes.
  EXPECT_EQ(tok->encode("<|endoftext|").size(), 12u);
  const std::vector<int> ids = tok->encode("in the <think> 数字 😀\n\n x");
  EXPECT_EQ(tok->decode(ids), "in the <think> 数字 😀\n\n x");
  EXPECT_EQ(tok->decode(std::vector<int>{258, 260, 262}), " the<think>");  // end of text decodes to nothing
  expect_error([&] { tok->decode(std::vector<int>{263}); }, {"token id 263", "tokenizer.json"});
}

TEST_F(HfTokenizerTest, NormalisesToNfcAndKeepsInvalidBytes) {
  const auto tok = load_tokenizer(write(test::tiny_hf_tokenizer()));
  EXPECT_EQ(tok->encode("e\xCC\x81"), tok->encode("\xC3\xA9"));  // e + U+0301 -> é
  const std::string invalid = "a\xFF\xC3(b\xE2\x82";             // stray, truncated and overlong-free bytes
  EXPECT_EQ(tok->decode(tok->encode(invalid)), invalid);
  EXPECT_EQ(unicode::encode_utf8(unicode::nfc(unicode::decode_utf8("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"))),
            "\xEA\xB0\x81");  // Hangul jamo -> 각
  EXPECT_EQ(unicode::encode_utf8(unicode::nfc(unicode::decode_utf8("q\xCC\x87\xCC\xA3"))), "q\xCC\xA3\xCC\x87");
  EXPECT_EQ(unicode::category(U'語'), unicode::Category::kLetter);
  EXPECT_EQ(unicode::category(U'½'), unicode::Category::kNumber);
  EXPECT_EQ(unicode::category(U'\u0301'), unicode::Category::kMark);
  EXPECT_TRUE(unicode::is_white_space(U'\u3000'));
  EXPECT_FALSE(unicode::is_white_space(U'\u200b'));
}

TEST_F(HfTokenizerTest, LoadsByContentAndHasItsOwnIdentity) {
  // Checkpoints carry their tokenizer as tokenizer.model: a JSON object there is still tokenizer.json.
  const std::string path = write(test::tiny_hf_tokenizer(), "tokenizer.model");
  EXPECT_TRUE(is_hf_tokenizer_file(path));
  EXPECT_EQ(load_tokenizer(path)->encode("in"), std::vector<int>{259});
  const TokenizerIdentity id = tokenizer_identity_of(path);
  EXPECT_EQ(id.kind, "huggingface");
  EXPECT_EQ(id.vocab_size, 263);
  EXPECT_EQ(parse_tokenizer_identity(tokenizer_identity_json(id), "h"), id);
  expect_error([] { parse_tokenizer_identity(nlohmann::json{{"kind", "huggingface"}, {"vocab_size", 3}}, "h"); },
               {"lacks \"sha256\""});
}

TEST_F(HfTokenizerTest, RefusesWhatItDoesNotSupportInOneLine) {
  auto with = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = test::tiny_hf_tokenizer();
    edit(j);
    return write(j);
  };
  const std::string wordpiece = with([](nlohmann::json& j) { j["model"]["type"] = "WordPiece"; });
  expect_error([&] { load_tokenizer(wordpiece); }, {"model type WordPiece is not supported", "tokenizer.json"});
  const std::string unigram = with([](nlohmann::json& j) { j["model"]["type"] = "Unigram"; });
  expect_error([&] { load_tokenizer(unigram); }, {"model type Unigram"});
  const std::string metaspace = with([](nlohmann::json& j) { j["pre_tokenizer"] = {{"type", "Metaspace"}}; });
  expect_error([&] { load_tokenizer(metaspace); }, {"without the ByteLevel pre-tokenizer", "Metaspace"});
  const std::string digits = with([](nlohmann::json& j) {
    nlohmann::json& steps = j["pre_tokenizer"]["pretokenizers"];
    steps.insert(steps.begin(), nlohmann::json::object({{"type", "Digits"}, {"individual_digits", true}}));
  });
  expect_error([&] { load_tokenizer(digits); }, {"pre-tokenizer Digits is not supported"});
  const std::string nfkc = with([](nlohmann::json& j) { j["normalizer"] = {{"type", "NFKC"}}; });
  expect_error([&] { load_tokenizer(nfkc); }, {"normalizer NFKC is not supported"});
  const std::string decoder = with([](nlohmann::json& j) { j["decoder"] = {{"type", "WordPiece"}}; });
  expect_error([&] { load_tokenizer(decoder); }, {"decoder WordPiece is not supported"});
  const std::string merged = with([](nlohmann::json& j) {
    j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "MergedWithPrevious";
  });
  expect_error([&] { load_tokenizer(merged); }, {"Split behavior MergedWithPrevious"});
  const std::string lstrip = with([](nlohmann::json& j) { j["added_tokens"][1]["lstrip"] = true; });
  expect_error([&] { load_tokenizer(lstrip); }, {"<|im_start|>", "lstrip"});
  const std::string backref = with([](nlohmann::json& j) {
    j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = R"(\p{Lu}+|\s+)";
  });
  expect_error([&] { load_tokenizer(backref); }, {"\\p{Lu}", "one-letter"});
  const std::string no_eos = with([](nlohmann::json& j) { j["added_tokens"].erase(0); });
  expect_error([&] { load_tokenizer(no_eos); }, {"no end-of-text token"});
  const std::string missing_byte = with([](nlohmann::json& j) { j["model"]["vocab"].erase("a"); });
  expect_error([&] { load_tokenizer(missing_byte); }, {"lacks the byte-level character of byte 0x61"});
  expect_error([&] { load_tokenizer((dir_ / "absent.json").string()); }, {"absent.json", "not found"});
}

TEST(PretokenizerRegex, MatchesAsPerlDoes) {
  auto pieces = [](const char* pattern, const char* text) {
    const PretokenizerRegex rx(pattern);
    const std::u32string t = unicode::decode_utf8(text);
    std::vector<std::string> out;
    size_t at = 0;
    while (const auto m = rx.find(t, at)) {
      out.push_back(unicode::encode_utf8(std::u32string_view(t).substr(m->first, m->second - m->first)));
      at = m->second;
    }
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces(R"(\p{N}{1,3})", "1234567"), (V{"123", "456", "7"}));
  EXPECT_EQ(pieces(R"(\s+(?!\S)|\s+)", "a   b"), (V{"  ", " "}));
  EXPECT_EQ(pieces(R"((?i:'s|'ll)|\p{L}+)", "IT'S we'LL"), (V{"IT", "'S", "we", "'LL"}));
  EXPECT_EQ(pieces(R"((?i:'s|k)|[^\s\p{L}]?\p{L}+)", "'ſt \u212a"), (V{"'ſ", "t", "\u212a"}));  // Unicode case folding
  EXPECT_EQ(pieces(R"([^\s\p{L}]+?x|\p{L})", "..x"), (V{"..x"}));
  EXPECT_EQ(pieces(R"([一-龥]+)", "ab中文c"), (V{"中文"}));
  EXPECT_EQ(pieces(R"([\-\]]+|\x41|\u0042)", "-]AB"), (V{"-]", "A", "B"}));
  expect_error([] { PretokenizerRegex("^a"); }, {"an anchor"});
  expect_error([] { PretokenizerRegex(R"(\d+)"); }, {"the escape \\d"});
  expect_error([] { PretokenizerRegex("(?<name>a)"); }, {"group kind"});
  expect_error([] { PretokenizerRegex("(a*)*"); }, {"can match nothing"});
  expect_error([] { PretokenizerRegex("(a"); }, {"missing ')'"});
  expect_error([] { PretokenizerRegex(R"(\x{123456789})"); }, {"malformed \\x{...}"});
}

}  // namespace
}  // namespace moe4d
