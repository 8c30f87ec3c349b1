// tests/trace/trace_unit_test.cc — CRC-32C against its published check value and the TensorBoard
// record framing / protobuf bytes against hand-computed encodings.
#include <gtest/gtest.h>

#include <cstring>

#include "trace/crc32c.h"
#include "trace/event_file_writer.h"
#include "trace/tensorboard_sink.h"

namespace moe4d {
namespace {

TEST(Crc32c, CheckValues) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);  // the CRC catalogue's check value for CRC-32C
  EXPECT_EQ(crc32c("", 0), 0u);
  const unsigned char zeros[32] = {0};
  EXPECT_EQ(crc32c(zeros, 32), 0x8A9136AAu);  // RFC 3720 B.4: 32 bytes of zeros
}

TEST(EventFile, ScalarEventBytes) {
  // Event{wall_time = 1.0, step = 3, summary{value{tag "a", simple_value 2.0}}}
  const std::string e = EventFileWriter::encode_scalar_event(3, 1.0, {{"a", 2.0f}});
  const unsigned char expected[] = {0x09, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f,  // 1: double 1.0
                                    0x10, 0x03,                           // 2: varint 3
                                    0x2a, 0x0a,                           // 5: Summary, 10 bytes
                                    0x0a, 0x08,                           //   1: Value, 8 bytes
                                    0x0a, 0x01, 'a',                      //     1: tag "a"
                                    0x15, 0, 0, 0, 0x40};                 //     2: float 2.0
  ASSERT_EQ(e.size(), sizeof(expected));
  EXPECT_EQ(std::memcmp(e.data(), expected, sizeof(expected)), 0);
}

TEST(EventFile, RecordFraming) {
  const std::string framed = EventFileWriter::frame_record("abc");
  ASSERT_EQ(framed.size(), 8u + 4 + 3 + 4);
  uint64_t length = 0;
  std::memcpy(&length, framed.data(), 8);
  EXPECT_EQ(length, 3u);
  uint32_t length_crc = 0, data_crc = 0;
  std::memcpy(&length_crc, framed.data() + 8, 4);
  std::memcpy(&data_crc, framed.data() + 15, 4);
  EXPECT_EQ(length_crc, masked_crc32c(framed.data(), 8));
  EXPECT_EQ(data_crc, masked_crc32c("abc", 3));
  const uint32_t crc = crc32c("abc", 3);
  EXPECT_EQ(data_crc, ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
}

TEST(TensorBoardScalars, PathsIntoTheRecord) {
  const nlohmann::json r = {{"step", 4}, {"loss", 2.5}, {"lr", 1e-3},
                            {"time", {{"step_s", 2.0}, {"comm", {{"tp", {{"exposed_s", 0.5}, {"waiting_s", 0.1}, {"transfer_s", 0.4}}}}}}},
                            {"moe", {{"aux_loss", 1.1}, {"layers", {{{"layer", 1}, {"imbalance", 1.5}}, {{"layer", 3}, {"imbalance", 1.2}}}}}}};
  std::map<std::string, float> s;
  for (const auto& [tag, value] : tensorboard_scalars(r)) s[tag] = value;
  EXPECT_EQ(s.at("loss"), 2.5f);
  EXPECT_EQ(s.at("comm/tp/share"), 0.25f);
  EXPECT_EQ(s.at("comm/tp/waiting_share"), 0.05f);
  EXPECT_EQ(s.at("moe/imbalance_max"), 1.5f);
  EXPECT_EQ(s.at("moe/layer3/imbalance"), 1.2f);
  EXPECT_FALSE(s.count("val_loss"));
}

}  // namespace
}  // namespace moe4d
