#include "trace/trace_event_list.h"

#include <cmath>

namespace moe4d {
namespace {
// Microseconds with nanosecond resolution: keeps the files small and the values exact enough.
double us(double v) { return std::round(v * 1000.0) / 1000.0; }
}  // namespace

void TraceEventList::add(const nlohmann::json& event) {
  if (count_ > 0) text_ += ",\n";
  text_ += event.dump();
  ++count_;
}

void TraceEventList::process_name(int pid, const std::string& name, int sort_index) {
  add({{"ph", "M"}, {"pid", pid}, {"tid", 0}, {"name", "process_name"}, {"args", {{"name", name}}}});
  add({{"ph", "M"}, {"pid", pid}, {"tid", 0}, {"name", "process_sort_index"}, {"args", {{"sort_index", sort_index}}}});
}

void TraceEventList::thread_name(int pid, int tid, const std::string& name, int sort_index) {
  add({{"ph", "M"}, {"pid", pid}, {"tid", tid}, {"name", "thread_name"}, {"args", {{"name", name}}}});
  add({{"ph", "M"}, {"pid", pid}, {"tid", tid}, {"name", "thread_sort_index"}, {"args", {{"sort_index", sort_index}}}});
}

void TraceEventList::complete(int pid, int tid, const std::string& name, const char* cat, double ts_us, double dur_us,
                              nlohmann::json args) {
  nlohmann::json e = {{"ph", "X"}, {"pid", pid}, {"tid", tid}, {"name", name}, {"cat", cat},
                      {"ts", us(ts_us)}, {"dur", us(std::max(dur_us, 0.0))}};
  if (!args.is_null()) e["args"] = std::move(args);
  add(e);
}

void TraceEventList::flow_start(int pid, int tid, const char* name, int64_t id, double ts_us) {
  add({{"ph", "s"}, {"pid", pid}, {"tid", tid}, {"name", name}, {"cat", "flow"}, {"id", id}, {"ts", us(ts_us)}});
}

void TraceEventList::flow_end(int pid, int tid, const char* name, int64_t id, double ts_us) {
  add({{"ph", "f"}, {"bp", "e"}, {"pid", pid}, {"tid", tid}, {"name", name}, {"cat", "flow"}, {"id", id},
       {"ts", us(ts_us)}});
}

void TraceEventList::counter(int pid, const std::string& name, double ts_us, const nlohmann::json& values) {
  add({{"ph", "C"}, {"pid", pid}, {"tid", 0}, {"name", name}, {"ts", us(ts_us)}, {"args", values}});
}

}  // namespace moe4d
