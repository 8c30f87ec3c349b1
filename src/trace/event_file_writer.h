// trace/event_file_writer.h — TensorBoard event files, written without TensorFlow.
//
// File: <dir>/events.out.tfevents.<unix seconds>.<host>, a sequence of TFRecords:
//   uint64 length (little endian) | uint32 masked CRC-32C of the 8 length bytes | data[length] |
//   uint32 masked CRC-32C of data                                           (trace/crc32c.h)
// Each record is a serialised tensorboard.Event protobuf (event.proto):
//   Event   { double wall_time = 1; int64 step = 2; oneof what { string file_version = 3; Summary summary = 5; } }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; oneof value { float simple_value = 2; } }
// The first record is the file_version event "brain.Event:2", as TensorFlow writes it; then one
// Event per step with one simple_value per scalar. The protobuf encoding is written here from the
// field numbers (tags: (field << 3) | wire type; varints; fixed 32/64-bit little endian).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace moe4d {

class EventFileWriter {
 public:
  // Creates `dir` (and parents) and a new event file in it; throws moe4d::Error naming the folder.
  explicit EventFileWriter(const std::string& dir);
  ~EventFileWriter();
  EventFileWriter(const EventFileWriter&) = delete;
  EventFileWriter& operator=(const EventFileWriter&) = delete;

  // One Event with a Summary of simple_value scalars; flushed so a running TensorBoard sees it.
  void add_scalars(int64_t step, double wall_time, const std::vector<std::pair<std::string, float>>& scalars);
  const std::string& path() const { return path_; }

  // The serialised Event messages (exposed for tests of the encoding).
  static std::string encode_file_version_event(double wall_time, const std::string& version);
  static std::string encode_scalar_event(int64_t step, double wall_time,
                                         const std::vector<std::pair<std::string, float>>& scalars);
  // data framed as one TFRecord.
  static std::string frame_record(const std::string& data);

 private:
  void write_record(const std::string& data);
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace moe4d
