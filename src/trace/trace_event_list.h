// trace/trace_event_list.h — events of the Chrome Trace Event format (what chrome://tracing and the
// Perfetto UI open), collected on one rank and serialised for merging on rank 0.
//
// Format (the "JSON Object Format" of the Trace Event spec): complete events ph "X" with ts and dur
// in microseconds, metadata ph "M" naming processes and threads (process_name, thread_name,
// *_sort_index), flow events ph "s" / "f" (same cat, name and id; "bp":"e" binds the end to the
// enclosing slice) drawing arrows between slices of different processes, counters ph "C".
// moe4d maps one process per rank (pid = world rank) and one thread per track (compute, one per
// communicator lane).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace moe4d {

class TraceEventList {
 public:
  void process_name(int pid, const std::string& name, int sort_index);
  void thread_name(int pid, int tid, const std::string& name, int sort_index);
  // A slice [ts_us, ts_us + dur_us] on (pid, tid). Slices of one track must nest (or not overlap).
  void complete(int pid, int tid, const std::string& name, const char* cat, double ts_us, double dur_us,
                nlohmann::json args = nullptr);
  // An arrow from the slice enclosing (pid, tid, ts_us) of the start to the one of the end.
  void flow_start(int pid, int tid, const char* name, int64_t id, double ts_us);
  void flow_end(int pid, int tid, const char* name, int64_t id, double ts_us);
  void counter(int pid, const std::string& name, double ts_us, const nlohmann::json& values);

  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  // The events as comma-separated JSON objects (no brackets), ready to splice into a traceEvents array.
  const std::string& serialized() const { return text_; }
  void clear() {
    text_.clear();
    count_ = 0;
  }

 private:
  void add(const nlohmann::json& event);
  std::string text_;
  size_t count_ = 0;
};

}  // namespace moe4d
