// tests/data/tokenizer_test.cc — ByteTokenizer, load_tokenizer and check_vocab_fits.
#include "data/tokenizer.h"

#include <gtest/gtest.h>

#include "data/byte_tokenizer.h"
#include "data_test_util.h"

namespace moe4d {
namespace {

using test::expect_error;

TEST(ByteTokenizer, RoundTripsUtf8AndArbitraryBytes) {
  ByteTokenizer tokenizer;
  const std::string text = "Grüße, 世界! ☃ 😀\n\ttabs  and   spaces\n";
  std::vector<int> ids = tokenizer.encode(text);
  ASSERT_EQ(ids.size(), text.size());  // one id per byte, UTF-8 included
  EXPECT_EQ(ids[0], 'G');
  EXPECT_EQ(ids[2], 0xC3);  // first byte of "ü"
  EXPECT_EQ(tokenizer.decode(ids), text);

  std::string binary;
  for (int b = 0; b < 256; ++b) binary.push_back(static_cast<char>(b));
  std::vector<int> all = tokenizer.encode(binary);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(all[b], b);
  EXPECT_EQ(tokenizer.decode(all), binary);
}

TEST(ByteTokenizer, VocabularyHoldsBytesPlusEos) {
  ByteTokenizer tokenizer;
  EXPECT_EQ(tokenizer.vocab_size(), 257);
  EXPECT_EQ(tokenizer.eos_id(), 256);
  EXPECT_EQ(tokenizer.spec(), "bytes");
  std::vector<int> ids = {'a', 256, 'b'};
  EXPECT_EQ(tokenizer.decode(ids), "ab");  // end-of-sequence decodes to nothing
  expect_error([&] { tokenizer.decode(std::vector<int>{'a', 257}); }, {"token id 257", "[0, 257)"});
  expect_error([&] { tokenizer.decode(std::vector<int>{-1}); }, {"token id -1"});
}

TEST(LoadTokenizer, BytesSpec) {
  std::unique_ptr<Tokenizer> tokenizer = load_tokenizer("bytes");
  EXPECT_EQ(tokenizer->vocab_size(), 257);
  EXPECT_EQ(tokenizer->spec(), "bytes");
}

TEST(LoadTokenizer, MissingAndInvalidModels) {
  test::TempDir dir;
  expect_error([&] { load_tokenizer(dir.file("nope.model")); }, {dir.file("nope.model"), "not found", "bytes"});
  test::write_file(dir.file("garbage.model"), "this is not a protobuf");
  expect_error([&] { load_tokenizer(dir.file("garbage.model")); },
               {dir.file("garbage.model"), "not a valid sentencepiece model"});
  expect_error([&] { load_tokenizer(dir.path()); }, {dir.path(), "is a directory"});
  expect_error([&] { load_tokenizer(""); }, {"tokenizer spec is empty"});
}

TEST(CheckVocabFits, AcceptsEqualOrLargerRejectsSmaller) {
  EXPECT_NO_THROW(check_vocab_fits(257, 257));
  EXPECT_NO_THROW(check_vocab_fits(257, 512));
  expect_error([] { check_vocab_fits(4096, 4000); }, {"model.vocab_size 4000", "4096", ">= 4096"});
}

}  // namespace
}  // namespace moe4d
