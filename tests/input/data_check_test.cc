// Token shards are verified when opened (SHA-256 and every id < vocab_size in one pass, header and
// size consistent), a verified marker spares the pass on the next open, and the tokenizer named by
// data.tokenizer is opened and checked against model.vocab_size and the shard header. Each of the
// issue's damaged inputs is refused with one line naming the file.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <utime.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "../data/data_test_util.h"
#include "core/sha256.h"
#include "data/data_check.h"
#include "data/token_dataset.h"
#include "data/token_shard_format.h"
#include "input_test_util.h"

namespace moe4d {
namespace {

using test::expect_one_line_error;

class DataCheckTest : public ::testing::Test {
 protected:
  TrainingDataSpec spec(const std::string& tokenizer = "bytes", int64_t model_vocab = 260) const {
    return TrainingDataSpec{.source = "run.yaml", .train = stem_ + ".bin", .tokenizer = tokenizer,
                            .model_vocab_size = model_vocab};
  }
  std::string bin() const { return test::read_file(stem_ + ".bin"); }
  void set_bin(const std::string& bytes) const { test::write_file(stem_ + ".bin", bytes); }
  nlohmann::json header() const { return nlohmann::json::parse(test::read_file(stem_ + ".json")); }
  void set_header(const nlohmann::json& h) const { test::write_file(stem_ + ".json", h.dump(2)); }
  void age(const std::string& path) const {  // an mtime old enough for the verified marker
    struct utimbuf times{.actime = ::time(nullptr) - 60, .modtime = ::time(nullptr) - 60};
    ASSERT_EQ(::utime(path.c_str(), &times), 0);
  }

  test::TempDir dir_{"moe4d-data-check"};
  std::string stem_ = test::write_text_shard(dir_.file("train"));
};

TEST_F(DataCheckTest, CleanDataPasses) { EXPECT_NO_THROW(check_training_data(spec())); }

TEST_F(DataCheckTest, AllZeroBinIsRefused) {
  set_bin(std::string(bin().size(), '\0'));
  expect_one_line_error([&] { check_training_data(spec()); }, {"run.yaml: data.train", stem_ + ".bin", "sha256 is"});
}

TEST_F(DataCheckTest, FlippedByteIsRefused) {
  std::string b = bin();
  b[b.size() / 3] ^= 0x10;
  set_bin(b);
  expect_one_line_error([&] { check_training_data(spec()); }, {stem_ + ".bin", "sha256", "corrupt or replaced"});
}

TEST_F(DataCheckTest, HeaderShaMismatchIsRefused) {
  nlohmann::json h = header();
  h["sha256"] = sha256_hex("x", 1);
  set_header(h);
  expect_one_line_error([&] { check_training_data(spec()); }, {stem_ + ".bin", "but its header", stem_ + ".json"});
}

TEST_F(DataCheckTest, HalvedNumTokensIsRefused) {
  nlohmann::json h = header();
  h["num_tokens"] = h["num_tokens"].get<int64_t>() / 2;
  set_header(h);
  expect_one_line_error([&] { check_training_data(spec()); }, {stem_ + ".bin", "bytes, but its header"});
}

TEST_F(DataCheckTest, TokenAtOrAboveVocabIsRefusedAtOpenWhereverItIs) {
  // The id sits in the middle of the shard and the header's sha256 is updated: only the id scan of
  // the open-time pass can catch it (it used to pass unless that window was sampled).
  std::string b = bin();
  const size_t at = (b.size() / 2) & ~size_t{1};
  b[at] = static_cast<char>(0x01);  // little-endian uint16 257 = 0x0101
  b[at + 1] = static_cast<char>(0x01);
  set_bin(b);
  nlohmann::json h = header();
  h["sha256"] = sha256_hex(b.data(), b.size());
  set_header(h);
  expect_one_line_error([&] { check_training_data(spec()); },
                        {stem_ + ".bin", "1 of", "are >= vocab_size 257", "token 257 at index " + std::to_string(at / 2)});
}

TEST_F(DataCheckTest, HugeNumTokensPrintsTheRealNumber) {
  std::string text = test::read_file(stem_ + ".json");
  const std::string n = std::to_string(header()["num_tokens"].get<int64_t>());
  text.replace(text.find("\"num_tokens\": " + n), 14 + n.size(), "\"num_tokens\": 9223372036854775808");
  test::write_file(stem_ + ".json", text);
  expect_one_line_error([&] { check_training_data(spec()); }, {stem_ + ".json", "9223372036854775808"});
  nlohmann::json h = header();
  h["num_tokens"] = int64_t{1} << 61;  // representable, but not as bytes of uint32 ids
  h["dtype"] = "uint32";
  set_header(h);
  expect_one_line_error([&] { check_training_data(spec()); }, {stem_ + ".json", "2305843009213693952"});
}

TEST_F(DataCheckTest, VerifiedMarkerSparesThePassAndNeverHidesAChange) {
  const std::string marker = stem_ + ".bin.verified";
  TokenDataset::open(stem_);
  EXPECT_FALSE(std::filesystem::exists(marker)) << "a just-written .bin must not be marked (coarse mtimes)";
  age(stem_ + ".bin");
  TokenDataset::open(stem_);
  ASSERT_TRUE(std::filesystem::exists(marker));
  const nlohmann::json m = nlohmann::json::parse(test::read_file(marker));
  EXPECT_EQ(m["sha256"], header()["sha256"]);
  EXPECT_EQ(m["bin_bytes"].get<int64_t>(), static_cast<int64_t>(bin().size()));
  // With the marker in place, a payload the marker did not see is still caught: rewriting the .bin
  // changes its mtime, so the pass runs again.
  std::string b = bin();
  b[5] ^= 1;
  set_bin(b);
  expect_one_line_error([&] { TokenDataset::open(stem_); }, {stem_ + ".bin", "sha256"});
  b[5] ^= 1;
  set_bin(b);
  age(stem_ + ".bin");
  EXPECT_NO_THROW(TokenDataset::open(stem_));
  // A header edit changes the header's hash: verified again.
  nlohmann::json h = header();
  h["vocab_size"] = 100;
  set_header(h);
  expect_one_line_error([&] { TokenDataset::open(stem_); }, {"are >= vocab_size 100"});
}

TEST_F(DataCheckTest, ScanMatchesSha256AndCountsEveryBadId) {
  const std::vector<uint16_t> ids = {1, 2, 500, 3, 700, 4};
  const auto* bytes = reinterpret_cast<const unsigned char*>(ids.data());
  const TokenPayloadCheck check = scan_token_payload(bytes, ids.size() * 2, TokenDType::kUint16, 257);
  EXPECT_EQ(check.sha256, sha256_hex(bytes, ids.size() * 2));
  EXPECT_EQ(check.out_of_vocab, 2);
  EXPECT_EQ(check.first_bad_index, 2);
  EXPECT_EQ(check.first_bad_id, 500u);
  // Ids across the 1 MiB chunk boundary keep their global index.
  std::vector<uint32_t> big((size_t{1} << 20) / 4 * 3, 7);
  big[(size_t{1} << 20) / 4 + 5] = 1u << 31;
  const TokenPayloadCheck wide =
      scan_token_payload(reinterpret_cast<const unsigned char*>(big.data()), big.size() * 4, TokenDType::kUint32, 100);
  EXPECT_EQ(wide.out_of_vocab, 1);
  EXPECT_EQ(wide.first_bad_index, static_cast<int64_t>((size_t{1} << 20) / 4 + 5));
  EXPECT_EQ(wide.first_bad_id, uint64_t{1} << 31);
}

TEST_F(DataCheckTest, TokenizerIsOpenedAndChecked) {
  expect_one_line_error([&] { check_training_data(spec(dir_.file("nope.model"))); },
                        {"run.yaml: data.tokenizer", dir_.file("nope.model"), "not found"});
  std::filesystem::create_directory(dir_.file("dir.model"));
  expect_one_line_error([&] { check_training_data(spec(dir_.file("dir.model"))); },
                        {"data.tokenizer", dir_.file("dir.model"), "is a directory"});
  test::write_file(dir_.file("garbage.model"), std::string(2000, '\x7f') + "not a protobuf");
  expect_one_line_error([&] { check_training_data(spec(dir_.file("garbage.model"))); },
                        {"data.tokenizer", dir_.file("garbage.model"), "not a valid sentencepiece model"});
  // Model vocabulary below the tokenizer's 257 ids; padding above is fine.
  expect_one_line_error([&] { check_training_data(spec("bytes", 256)); },
                        {"run.yaml", "model.vocab_size 256", "257 ids", "bytes"});
  EXPECT_NO_THROW(check_training_data(spec("bytes", 4096)));
  // Without data.tokenizer, the one the shard's header names is opened.
  EXPECT_NO_THROW(check_training_data(spec("")));
  nlohmann::json h = header();
  h["tokenizer"] = "gone.model";
  set_header(h);
  expect_one_line_error([&] { check_training_data(spec("")); }, {"data.tokenizer (from the header of data.train)",
                                                                 dir_.file("gone.model")});
}

TEST_F(DataCheckTest, ShardWithMoreIdsThanTheTokenizerIsRefused) {
  // A shard declared with a 1000-id vocabulary, used with the 257-id byte tokenizer.
  write_token_shard(stem_, std::vector<int>{1, 2, 3, 999}, 1000, "bytes", 1);
  expect_one_line_error([&] { check_training_data(spec("bytes", 1024)); },
                        {"data.train", stem_ + ".json", "vocab_size 1000", "257"});
}

}  // namespace
}  // namespace moe4d
