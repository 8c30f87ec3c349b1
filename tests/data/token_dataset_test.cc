// tests/data/token_dataset_test.cc — token shard writer/reader round trips and every reader error.
#include "data/token_dataset.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/sha256.h"
#include "data/token_shard_writer.h"
#include "data_test_util.h"

namespace moe4d {
namespace {

namespace fs = std::filesystem;
using test::expect_error;

std::vector<int> ramp(int count, int modulo) {
  std::vector<int> ids(count);
  for (int i = 0; i < count; ++i) ids[i] = (i * 7919) % modulo;
  return ids;
}

std::vector<int32_t> read_all(const TokenDataset& dataset) {
  std::vector<int32_t> out(dataset.num_tokens());
  dataset.read(0, dataset.num_tokens(), out.data());
  return out;
}

class TokenShardTest : public ::testing::Test {
 protected:
  // Writes a valid uint16 shard "s" (vocab 1000) and returns the stem.
  std::string write_valid_shard() {
    std::string stem = dir_.file("s");
    write_token_shard(stem, ramp(500, 1000), 1000, "bytes", 3);
    return stem;
  }
  void edit_header(const std::string& stem, const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json header = nlohmann::json::parse(test::read_file(stem + ".json"));
    edit(header);
    test::write_file(stem + ".json", header.dump());
  }
  test::TempDir dir_;
};

TEST_F(TokenShardTest, Uint16RoundTrip) {
  std::vector<int> ids = ramp(1234, 1000);
  std::string stem = dir_.file("train");
  TokenShardHeader written = write_token_shard(stem + ".bin", ids, 1000, "tokenizer.model", 5);
  EXPECT_EQ(written.dtype, TokenDType::kUint16);
  EXPECT_EQ(fs::file_size(stem + ".bin"), 1234u * 2);
  EXPECT_EQ(written.sha256, sha256_file(stem + ".bin"));

  nlohmann::json header = nlohmann::json::parse(test::read_file(stem + ".json"));
  EXPECT_EQ(header["format"], "moe4d-tokens");
  EXPECT_EQ(header["version"], 1);
  EXPECT_EQ(header["dtype"], "uint16");
  EXPECT_EQ(header["num_tokens"], 1234);
  EXPECT_EQ(header["vocab_size"], 1000);
  EXPECT_EQ(header["tokenizer"], "tokenizer.model");
  EXPECT_EQ(header["sha256"], written.sha256);
  EXPECT_EQ(header["documents"], 5);

  for (const std::string& path : {stem, stem + ".bin", stem + ".json"}) {
    TokenDataset dataset = TokenDataset::open(path, /*verify=*/true);
    EXPECT_EQ(dataset.num_tokens(), 1234);
    EXPECT_EQ(dataset.vocab_size(), 1000);
    EXPECT_EQ(dataset.num_documents(), 5);
    EXPECT_EQ(dataset.dtype(), TokenDType::kUint16);
    std::vector<int32_t> back = read_all(dataset);
    EXPECT_TRUE(std::equal(back.begin(), back.end(), ids.begin()));
    EXPECT_EQ(dataset.token(1233), ids[1233]);
    // A relative tokenizer path is resolved against the header's directory.
    EXPECT_EQ(dataset.tokenizer_spec(), dir_.file("tokenizer.model"));
  }
  EXPECT_FALSE(fs::exists(stem + ".bin.tmp-" + std::to_string(::getpid())));
}

TEST_F(TokenShardTest, Uint32RoundTripAboveUint16Range) {
  const int vocab = 70000;
  std::vector<int> ids = ramp(3000, vocab);
  ids[0] = vocab - 1;
  ids[1] = 65536;
  TokenShardWriter writer(dir_.file("big"), vocab, "bytes");
  writer.append(std::span<const int>(ids).first(1000));
  writer.end_document();
  writer.append(std::span<const int>(ids).subspan(1000));
  writer.end_document();
  TokenShardHeader header = writer.finish();
  EXPECT_EQ(header.dtype, TokenDType::kUint32);
  EXPECT_EQ(fs::file_size(dir_.file("big.bin")), 3000u * 4);

  TokenDataset dataset = TokenDataset::open(dir_.file("big.json"), /*verify=*/true);
  EXPECT_EQ(dataset.dtype(), TokenDType::kUint32);
  EXPECT_EQ(dataset.num_documents(), 2);
  EXPECT_EQ(dataset.tokenizer_spec(), "bytes");
  std::vector<int32_t> back = read_all(dataset);
  EXPECT_TRUE(std::equal(back.begin(), back.end(), ids.begin()));

  TokenDataset moved = std::move(dataset);
  EXPECT_EQ(moved.token(0), vocab - 1);
  EXPECT_EQ(moved.token(1), 65536);
}

TEST_F(TokenShardTest, WriterRejectsBadIdsAndLeavesNothingBehind) {
  {
    TokenShardWriter writer(dir_.file("w"), 100, "bytes");
    writer.append(std::vector<int>{1, 2, 3});
    expect_error([&] { writer.append(std::vector<int>{4, 100}); }, {dir_.file("w.bin"), "token id 100", "position 4"});
    expect_error([&] { writer.append(std::vector<int>{-3}); }, {"token id -3"});
  }  // destroyed without finish()
  {
    TokenShardWriter writer(dir_.file("e"), 100, "bytes");
    expect_error([&] { writer.finish(); }, {dir_.file("e.bin"), "empty"});
  }
  EXPECT_TRUE(fs::is_empty(dir_.path()));
  expect_error([&] { TokenShardWriter(dir_.file("no/such/dir/x"), 100, "bytes"); }, {"cannot create"});
  expect_error([&] { TokenShardWriter(dir_.file("v"), 0, "bytes"); }, {"vocab_size is 0"});
}

TEST_F(TokenShardTest, MissingHeader) {
  std::string stem = write_valid_shard();
  fs::remove(stem + ".json");
  expect_error([&] { TokenDataset::open(stem + ".bin"); }, {stem + ".json", "not found"});
}

TEST_F(TokenShardTest, BadJson) {
  std::string stem = write_valid_shard();
  test::write_file(stem + ".json", "{\"format\": \"moe4d-tokens\",");
  expect_error([&] { TokenDataset::open(stem); }, {stem + ".json", "not valid JSON"});
  test::write_file(stem + ".json", "[1, 2]");
  expect_error([&] { TokenDataset::open(stem); }, {stem + ".json", "expected a JSON object"});
}

TEST_F(TokenShardTest, HeaderFieldErrors) {
  std::string stem = write_valid_shard();
  const std::string json = stem + ".json";
  auto expect_edit_error = [&](const std::function<void(nlohmann::json&)>& edit,
                               std::initializer_list<std::string> parts) {
    std::string original = test::read_file(json);
    edit_header(stem, edit);
    expect_error([&] { TokenDataset::open(stem); }, parts);
    test::write_file(json, original);
  };
  expect_edit_error([](nlohmann::json& h) { h["dtype"] = "float32"; }, {json, "dtype \"float32\"", "uint16"});
  expect_edit_error([](nlohmann::json& h) { h["vocab_size"] = 70000; }, {json, "uint16 cannot hold vocab_size 70000"});
  expect_edit_error([](nlohmann::json& h) { h["format"] = "npy"; }, {json, "format is \"npy\""});
  expect_edit_error([](nlohmann::json& h) { h["version"] = 2; }, {json, "version 2"});
  expect_edit_error([](nlohmann::json& h) { h.erase("sha256"); }, {json, "missing key \"sha256\""});
  expect_edit_error([](nlohmann::json& h) { h["extra"] = 1; }, {json, "unknown key \"extra\""});
  expect_edit_error([](nlohmann::json& h) { h["num_tokens"] = 0; }, {json, "num_tokens is 0"});
  expect_edit_error([](nlohmann::json& h) { h["num_tokens"] = "500"; }, {json, "\"num_tokens\"", "integer"});
  expect_edit_error([](nlohmann::json& h) { h["sha256"] = "abc"; }, {json, "sha256 \"abc\""});
  EXPECT_NO_THROW(TokenDataset::open(stem, /*verify=*/true));  // restored
}

TEST_F(TokenShardTest, WrongSize) {
  std::string stem = write_valid_shard();
  edit_header(stem, [](nlohmann::json& h) { h["num_tokens"] = 400; });
  expect_error([&] { TokenDataset::open(stem); },
               {stem + ".bin", "1000 bytes", "400 uint16 tokens = 800 bytes", "does not belong"});
}

TEST_F(TokenShardTest, WrongDtypeForSize) {
  std::string stem = write_valid_shard();  // 500 uint16 tokens
  edit_header(stem, [](nlohmann::json& h) { h["dtype"] = "uint32"; });
  expect_error([&] { TokenDataset::open(stem); }, {stem + ".bin", "500 uint32 tokens = 2000 bytes", "truncated"});
}

TEST_F(TokenShardTest, TruncatedBin) {
  std::string stem = write_valid_shard();
  fs::resize_file(stem + ".bin", 999);
  expect_error([&] { TokenDataset::open(stem); }, {stem + ".bin", "999 bytes", "truncated"});
  fs::remove(stem + ".bin");
  expect_error([&] { TokenDataset::open(stem); }, {"cannot open token shard", stem + ".bin"});
}

TEST_F(TokenShardTest, ChecksumMismatch) {
  std::string stem = write_valid_shard();
  std::string bin = test::read_file(stem + ".bin");
  bin[10] ^= 1;
  test::write_file(stem + ".bin", bin);
  TokenDataset dataset = TokenDataset::open(stem, /*verify=*/false);  // cheap checks pass
  expect_error([&] { dataset.verify_checksum(); }, {stem + ".bin", "sha256 is", "corrupt"});
  expect_error([&] { TokenDataset::open(stem, /*verify=*/true); }, {stem + ".bin", "sha256"});
}

TEST_F(TokenShardTest, TokenOutsideVocabulary) {
  std::string stem = dir_.file("v");
  write_token_shard(stem, std::vector<int>{1, 2, 900, 3, 950, 4}, 1000, "bytes", 1);
  edit_header(stem, [](nlohmann::json& h) { h["vocab_size"] = 10; });  // .bin and its sha unchanged
  TokenDataset dataset = TokenDataset::open(stem, /*verify=*/false);
  EXPECT_NO_THROW(dataset.verify_checksum());
  expect_error([&] { dataset.validate_tokens(); },
               {stem + ".bin", "2 of 6 tokens are >= vocab_size 10", "token 900 at index 2"});
  int32_t out[6];
  EXPECT_NO_THROW(dataset.read(0, 2, out));
  expect_error([&] { dataset.read(1, 3, out); }, {stem + ".bin", "token 900 at index 2", ">= vocab_size 10"});
  expect_error([&] { dataset.token(4); }, {"token 950 at index 4"});
  expect_error([&] { TokenDataset::open(stem, /*verify=*/true); }, {"are >= vocab_size 10"});
}

}  // namespace
}  // namespace moe4d
