#include "trace/event_file_writer.h"

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"
#include "trace/crc32c.h"

namespace moe4d {
namespace {

// Protobuf wire types.
constexpr int kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(char(uint8_t(v) | 0x80));
    v >>= 7;
  }
  out.push_back(char(uint8_t(v)));
}
void put_tag(std::string& out, int field, int wire_type) { put_varint(out, uint64_t(field) << 3 | uint64_t(wire_type)); }
template <typename T>
void put_fixed(std::string& out, T value) {  // x86 / ARM are little endian, as protobuf's fixed types
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}
void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_tag(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out += bytes;
}

std::string event_header(int64_t step, double wall_time) {
  std::string e;
  put_tag(e, 1, kFixed64);  // wall_time
  put_fixed(e, wall_time);
  if (step != 0) {          // proto3: a default value is not written
    put_tag(e, 2, kVarint);  // step (int64: two's complement varint)
    put_varint(e, uint64_t(step));
  }
  return e;
}

std::string host_name() {
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == 0) return "localhost";
  return name;
}

}  // namespace

std::string EventFileWriter::encode_file_version_event(double wall_time, const std::string& version) {
  std::string e = event_header(0, wall_time);
  put_bytes(e, 3, version);  // file_version
  return e;
}

std::string EventFileWriter::encode_scalar_event(int64_t step, double wall_time,
                                                 const std::vector<std::pair<std::string, float>>& scalars) {
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    std::string v;
    put_bytes(v, 1, tag);  // Summary.Value.tag
    put_tag(v, 2, kFixed32);  // Summary.Value.simple_value
    put_fixed(v, value);
    put_bytes(summary, 1, v);  // Summary.value (repeated)
  }
  std::string e = event_header(step, wall_time);
  put_bytes(e, 5, summary);  // Event.summary
  return e;
}

std::string EventFileWriter::frame_record(const std::string& data) {
  std::string out;
  const uint64_t length = data.size();
  put_fixed(out, length);
  put_fixed(out, masked_crc32c(out.data(), 8));
  out += data;
  put_fixed(out, masked_crc32c(data.data(), data.size()));
  return out;
}

EventFileWriter::EventFileWriter(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail("train.tensorboard_dir: cannot create the folder {}: {}", dir, ec.message());
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  path_ = fmt::format("{}/events.out.tfevents.{}.{}", dir, int64_t(now), host_name());
  // A restart within the same second must not overwrite the previous run's file.
  for (int i = 1; std::filesystem::exists(path_); ++i)
    path_ = fmt::format("{}/events.out.tfevents.{}.{}.{}", dir, int64_t(now), host_name(), i);
  file_ = std::fopen(path_.c_str(), "wb");
  if (!file_) fail("train.tensorboard_dir: cannot create the event file {}: {}", path_, std::strerror(errno));
  write_record(encode_file_version_event(now, "brain.Event:2"));
}

EventFileWriter::~EventFileWriter() {
  if (file_) std::fclose(file_);
}

void EventFileWriter::write_record(const std::string& data) {
  const std::string record = frame_record(data);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size() || std::fflush(file_) != 0)
    fail("train.tensorboard_dir: writing the event file {} failed (disk full?)", path_);
}

void EventFileWriter::add_scalars(int64_t step, double wall_time,
                                  const std::vector<std::pair<std::string, float>>& scalars) {
  write_record(encode_scalar_event(step, wall_time, scalars));
}

}  // namespace moe4d
