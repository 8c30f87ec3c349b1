#include "trace/trace_file_writer.h"

#include <zlib.h>

#include <filesystem>

#include "core/error.h"
#include "core/log.h"

namespace moe4d {

TraceFileWriter::TraceFileWriter(std::string path) : path_(std::move(path)) {
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(path_).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) fail("train.trace_steps: cannot create the folder {} of the trace file: {}", parent.string(), ec.message());
  file_ = gzopen(path_.c_str(), "wb6");
  if (!file_) fail("train.trace_steps: cannot create the trace file {}", path_);
  write("{\"traceEvents\":[\n");
}

TraceFileWriter::~TraceFileWriter() {
  try {
    close();
  } catch (const Error& e) {  // a destructor must not throw; the message still reaches the log
    log_warn("{}", e.what());
  }
}

void TraceFileWriter::write(const std::string& text) {
  if (text.empty()) return;
  if (gzwrite(static_cast<gzFile>(file_), text.data(), unsigned(text.size())) != int(text.size()))
    fail("train.trace_steps: writing the trace file {} failed (disk full?)", path_);
}

void TraceFileWriter::append(const std::string& events) {
  if (!file_ || events.empty()) return;
  if (any_) write(",\n");
  write(events);
  any_ = true;
}

void TraceFileWriter::close(const nlohmann::json& other_data) {
  if (!file_) return;
  write("\n],\"displayTimeUnit\":\"ms\",\"otherData\":" + other_data.dump() + "}\n");
  const int rc = gzclose(static_cast<gzFile>(file_));
  file_ = nullptr;
  if (rc != Z_OK) fail("train.trace_steps: closing the trace file {} failed (disk full?)", path_);
}

}  // namespace moe4d
