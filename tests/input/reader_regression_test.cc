// Inputs the fuzzers (tests/fuzz) found to escape the readers as exceptions other than
// moe4d::Error — each used to abort the process; now each is one line naming the file.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors.h"
#include "config/config_loader.h"
#include "data/token_shard_format.h"
#include "input_test_util.h"

namespace moe4d {
namespace {

using test::expect_one_line_error;

void write(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

TEST(ReaderRegressionTest, NumberOverflowInJsonIsAnError) {
  // nlohmann::json throws out_of_range, not parse_error, for a number too large for a double.
  expect_one_line_error([] { parse_token_shard_header("{\"num_tokens\": 6e278780}", "h.json"); },
                        {"h.json", "not valid JSON"});
  test::TempDir dir("moe4d-reader");
  std::filesystem::create_directories(dir.file("ckpt/step_00000001"));
  write(dir.file("ckpt/step_00000001/MANIFEST.json"), "{\"format\": \"moe4d-checkpoint\", \"step\": 1e999999}");
  expect_one_line_error([&] { Checkpoint::open(dir.file("ckpt/step_00000001")); },
                        {"step_00000001 is corrupt", "MANIFEST.json is not valid JSON"});
  const std::string header = "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4e99999]}}";
  std::string file(8, '\0');
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  write(dir.file("x.safetensors"), file + header + "abcd");
  expect_one_line_error([&] { SafetensorsFile::open(dir.file("x.safetensors")); }, {dir.file("x.safetensors")});
}

TEST(ReaderRegressionTest, ManifestFieldsOfTheWrongTypeAreCorruption) {
  test::TempDir dir("moe4d-reader");
  const std::string step = dir.file("step_00000001");
  std::filesystem::create_directories(step);
  // "format" as a number made json::value() throw type_error.
  write(step + "/MANIFEST.json", "{\"format\": 1, \"version\": 1, \"step\": 1, \"files\": {}}");
  expect_one_line_error([&] { Checkpoint::open(step); }, {"step_00000001 is corrupt", "has no \"format\""});
  // A version that only equals 1 after truncation to int.
  write(step + "/MANIFEST.json",
        "{\"format\": \"moe4d-checkpoint\", \"version\": 4294967297, \"step\": 1, \"files\": {}}");
  expect_one_line_error([&] { Checkpoint::open(step); }, {"has version 4294967297, expected 1"});
}

TEST(ReaderRegressionTest, ConfigErrorsQuoteControlBytesOnOneLine) {
  // yaml-cpp read these one-line inputs as scalars holding a line break, which the message quoted.
  for (const std::string& text : {std::string("n\x05\x00n_siz", 8), std::string("\xff\xff\xff\x00null", 8)}) {
    const std::string message =
        expect_one_line_error([&] { parse_config(text, "fuzz.yaml"); }, {"fuzz.yaml:1: expected a map of sections"});
    EXPECT_NE(message.find("\\x"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace moe4d
