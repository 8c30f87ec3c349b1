// trace/trace_file_writer.h — one gzip-compressed Chrome Trace Event JSON file per run
// ({"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}), written on world rank 0 as
// the traced steps arrive, so memory stays bounded by one step's events. Perfetto UI and
// chrome://tracing open .json.gz directly (docs/tracing.md).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace moe4d {

class TraceFileWriter {
 public:
  // Creates the parent folders and the file; throws moe4d::Error naming the path if it cannot.
  explicit TraceFileWriter(std::string path);
  // Closes the JSON if close() was not called (the file stays valid after an early exit).
  ~TraceFileWriter();
  TraceFileWriter(const TraceFileWriter&) = delete;
  TraceFileWriter& operator=(const TraceFileWriter&) = delete;

  // Comma-separated events (TraceEventList::serialized()); empty fragments are skipped.
  void append(const std::string& events);
  // Ends the event array and adds "otherData"; later calls do nothing.
  void close(const nlohmann::json& other_data = nlohmann::json::object());
  const std::string& path() const { return path_; }

 private:
  void write(const std::string& text);
  std::string path_;
  void* file_ = nullptr;  // gzFile
  bool any_ = false;
};

}  // namespace moe4d
