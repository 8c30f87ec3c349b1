// Tests of checkpoint/safetensors.h: byte-exact layout, round trips over dtypes, shapes, strided
// views and metadata, and one exact error message per kind of damaged file.
#include "checkpoint/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"

namespace moe4d {
namespace {

class SafetensorsTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fmt::format("{}/moe4d_safetensors_test_{}", std::filesystem::temp_directory_path().string(), getpid());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  // A file made of a header length, a header and a data section, exactly as given.
  std::string write_raw(const std::string& name, const std::string& header, const std::string& data,
                        uint64_t header_length) {
    std::ofstream out(path(name), std::ios::binary);
    for (int i = 0; i < 8; ++i) out.put(static_cast<char>(header_length >> (8 * i)));
    out << header << data;
    return path(name);
  }
  std::string write_raw(const std::string& name, const std::string& header, const std::string& data) {
    return write_raw(name, header, data, header.size());
  }

  static std::string read_all(const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  // The message of the moe4d::Error that opening `file` throws ("" if it opens).
  static std::string open_error(const std::string& file) {
    try {
      SafetensorsFile::open(file);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  std::string dir_;
};

TEST_F(SafetensorsTest, ByteExactLayout) {
  float values[2] = {1.0f, -2.0f};
  save_safetensors(path("x.safetensors"), {{"x", Tensor::f32(values, Shape{2})}}, {{"k", "v"}});
  const std::string header = R"({"__metadata__":{"k":"v"},"x":{"data_offsets":[0,8],"dtype":"F32","shape":[2]}})";
  std::string expected;
  const uint64_t padded = (header.size() + 7) / 8 * 8;
  for (int i = 0; i < 8; ++i) expected.push_back(static_cast<char>(padded >> (8 * i)));
  expected += header + std::string(padded - header.size(), ' ');
  expected.append(reinterpret_cast<const char*>(values), sizeof(values));
  EXPECT_EQ(read_all(path("x.safetensors")), expected);
}

TEST_F(SafetensorsTest, RoundTripDtypesShapesStridesAndMetadata) {
  std::vector<float> matrix(6 * 8);
  for (size_t i = 0; i < matrix.size(); ++i) matrix[i] = 0.5f * static_cast<float>(i) - 7.0f;
  std::vector<uint16_t> bf16 = {0x3f80, 0xc000, 0x7f80, 0x0001, 0xffff};
  std::vector<int64_t> i64 = {-1, 2, -3, 4, -5, 6, -7, 1LL << 40};
  std::vector<uint8_t> u8 = {1, 2, 3};
  double scalar = 3.25;
  std::vector<uint16_t> u16(2 * 3 * 2 * 2);
  for (size_t i = 0; i < u16.size(); ++i) u16[i] = static_cast<uint16_t>(1000 + i);
  Tensor full = Tensor::f32(matrix.data(), Shape{6, 8});
  Tensor column_block = full.slice(1, 2, 3);  // [6, 3], row stride 8: a strided view
  Tensor every_other;                          // [3, 8] with a row stride of 16: rows 0, 2, 4
  every_other = Tensor::f32(matrix.data(), Shape{3, 8});
  every_other.strides = {16, 1, 0, 0};
  Tensor transposed = Tensor::f32(matrix.data(), Shape{8, 6});  // element stride 8: gathered one by one
  transposed.strides = {1, 8, 0, 0};

  const NamedTensors tensors = {
      {"u8", Tensor(u8.data(), DType::kU8, Shape{3})},  // odd byte count: must not misalign the rest
      {"matrix", full},
      {"bf16", Tensor(bf16.data(), DType::kBF16, Shape{5})},
      {"i64", Tensor(i64.data(), DType::kI64, Shape{2, 2, 2})},
      {"scalar", Tensor(&scalar, DType::kF64, Shape())},
      {"empty", Tensor(matrix.data(), DType::kF32, Shape{0, 4})},
      {"u16_4d", Tensor(u16.data(), DType::kU16, Shape{2, 3, 2, 2})},
      {"column_block", column_block},
      {"every_other", every_other},
      {"transposed", transposed},
  };
  const SafetensorsMetadata metadata = {{"format", "pt"}, {"config", "model:\n  hidden_size: 8\n"}};
  save_safetensors(path("all.safetensors"), tensors, metadata);

  SafetensorsFile file = SafetensorsFile::open(path("all.safetensors"));
  EXPECT_EQ(file.metadata(), metadata);
  EXPECT_EQ(file.tensors().size(), tensors.size());
  for (const auto& [name, original] : tensors) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(file.contains(name));
    const Tensor& t = file.tensor(name);
    EXPECT_EQ(t.dtype, original.dtype);
    EXPECT_EQ(t.shape, original.shape);
    EXPECT_TRUE(t.is_contiguous());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % dtype_size(t.dtype), 0u);
  }
  EXPECT_EQ(std::memcmp(file.tensor("u8").data, u8.data(), 3), 0);
  EXPECT_EQ(std::memcmp(file.tensor("matrix").data, matrix.data(), matrix.size() * 4), 0);
  EXPECT_EQ(std::memcmp(file.tensor("bf16").data, bf16.data(), bf16.size() * 2), 0);
  EXPECT_EQ(std::memcmp(file.tensor("i64").data, i64.data(), i64.size() * 8), 0);
  EXPECT_EQ(*static_cast<const double*>(file.tensor("scalar").data), 3.25);
  EXPECT_EQ(file.tensor("empty").numel(), 0);
  EXPECT_EQ(std::memcmp(file.tensor("u16_4d").data, u16.data(), u16.size() * 2), 0);
  for (const auto& [name, original] : tensors) {
    if (original.dtype != DType::kF32 || original.numel() == 0) continue;
    SCOPED_TRACE(name);
    std::vector<float> expected(static_cast<size_t>(original.numel()));
    copy_to_contiguous(original, expected.data());
    const float* got = file.tensor(name).f32();
    for (size_t i = 0; i < expected.size(); ++i) ASSERT_EQ(got[i], expected[i]) << "element " << i;
  }
  EXPECT_EQ(file.tensor("transposed").f32()[1], matrix[8]);  // row 0 of the transpose is column 0
}

TEST_F(SafetensorsTest, WriterRejectsBadNames) {
  float v = 1;
  const Tensor t = Tensor::f32(&v, Shape{1});
  const std::string file = path("bad.safetensors");
  try {
    save_safetensors(file, {{"a", t}, {"a", t}}, {});
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), file + ": tensor 'a' is given twice, expected unique names");
  }
  EXPECT_THROW(save_safetensors(file, {{"__metadata__", t}}, {}), Error);
  EXPECT_THROW(save_safetensors(file, {{"", t}}, {}), Error);
}

TEST_F(SafetensorsTest, UnknownTensorNameNamesFileAndTensor) {
  float v = 1;
  save_safetensors(path("one.safetensors"), {{"w", Tensor::f32(&v, Shape{1})}}, {});
  SafetensorsFile file = SafetensorsFile::open(path("one.safetensors"));
  try {
    file.tensor("v");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), path("one.safetensors") + ": no tensor 'v'");
  }
}

TEST_F(SafetensorsTest, MissingAndTooShortFiles) {
  EXPECT_EQ(open_error(path("none.safetensors")),
            "cannot read safetensors file " + path("none.safetensors") + ": No such file or directory");
  std::ofstream(path("short.safetensors")) << "12345";
  EXPECT_EQ(open_error(path("short.safetensors")),
            path("short.safetensors") +
                ": file is 5 bytes, expected at least the 8-byte header length of a safetensors file");
}

TEST_F(SafetensorsTest, TruncatedFile) {
  std::vector<float> values(16, 1.5f);
  save_safetensors(path("full.safetensors"), {{"w", Tensor::f32(values.data(), Shape{4, 4})}}, {});
  std::string bytes = read_all(path("full.safetensors"));
  bytes.resize(bytes.size() - 10);
  std::ofstream(path("cut.safetensors"), std::ios::binary) << bytes;
  EXPECT_EQ(open_error(path("cut.safetensors")),
            path("cut.safetensors") +
                ": tensor 'w': data_offsets [0, 64] out of range, expected begin <= end <= 54 (the data section size)");
}

TEST_F(SafetensorsTest, HeaderLengthTooLarge) {
  const std::string header = R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  const std::string file = write_raw("long.safetensors", header, "abcd", 1000000);
  EXPECT_EQ(open_error(file), fmt::format("{}: header length 1000000 exceeds the {} bytes that follow it (truncated "
                                          "or not a safetensors file)",
                                          file, header.size() + 4));
}

TEST_F(SafetensorsTest, BadJson) {
  const std::string file = write_raw("json.safetensors", R"({"w": {"dtype": "F32",)", "");
  EXPECT_EQ(open_error(file).rfind(file + ": header is not valid JSON: [json.exception.parse_error.101]", 0), 0u)
      << open_error(file);
  EXPECT_EQ(open_error(write_raw("array.safetensors", "[1, 2]", "")),
            path("array.safetensors") + ": header is array, expected a JSON object");
}

TEST_F(SafetensorsTest, OffsetsOutOfRange) {
  const std::string file =
      write_raw("range.safetensors", R"({"w":{"dtype":"F32","shape":[100],"data_offsets":[0,400]}})", "0123456789abcdef");
  EXPECT_EQ(open_error(file),
            file + ": tensor 'w': data_offsets [0, 400] out of range, expected begin <= end <= 16 (the data section size)");
  const std::string reversed =
      write_raw("reversed.safetensors", R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", "0123456789ab");
  EXPECT_EQ(open_error(reversed), reversed + ": tensor 'w': data_offsets [8, 4] out of range, expected begin <= end "
                                             "<= 12 (the data section size)");
}

TEST_F(SafetensorsTest, OverlappingTensors) {
  const std::string file = write_raw(
      "overlap.safetensors",
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
      "0123456789ab");
  EXPECT_EQ(open_error(file), file + ": tensor 'b': data_offsets [4, 12] overlap tensor 'a' [0, 8]");
}

TEST_F(SafetensorsTest, SizeDtypeShapeAndAlignmentChecks) {
  const std::string size = write_raw(
      "size.safetensors", R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", "01234567");
  EXPECT_EQ(open_error(size), size + ": tensor 'w': data_offsets [0, 8] hold 8 bytes, expected 12 ([3] x F32 of 4 bytes)");
  const std::string dtype = write_raw(
      "dtype.safetensors", R"({"w":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]}})", "0");
  EXPECT_EQ(open_error(dtype),
            dtype + ": tensor 'w': unknown dtype \"BOOL\", expected one of F32, BF16, F16, F64, I32, I64, U8, U16, U32");
  const std::string dims = write_raw(
      "dims.safetensors", R"({"w":{"dtype":"U8","shape":[1,1,1,1,1],"data_offsets":[0,1]}})", "0");
  EXPECT_EQ(open_error(dims), dims + ": tensor 'w': shape [1,1,1,1,1] is not a list of at most 4 dimensions");
  const std::string negative = write_raw(
      "negative.safetensors", R"({"w":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}})", "0");
  EXPECT_EQ(open_error(negative), negative + ": tensor 'w': shape [-1] has a non-integer or negative dimension");
  // 64 header bytes put the data section at offset 72; a F32 at data offset 2 is misaligned.
  std::string header = R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}})";
  header.append(64 - header.size(), ' ');
  const std::string aligned = write_raw("align.safetensors", header, "012345");
  EXPECT_EQ(open_error(aligned), aligned + ": tensor 'w': data offset 2 is not aligned to its 4-byte elements");
}

}  // namespace
}  // namespace moe4d
