// train/metrics.h — what a training step reports: the JSONL metrics file and the progress line.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace moe4d {

// Appends one JSON object per line. On resume, lines of steps after the resume point (written by the
// interrupted run) are dropped first, so the file always describes one consistent run; so is a
// partial line (a write cut off by a kill or a full disk), which is cut off, never kept.
//
// Every line goes to the file in one write() (O_APPEND), so a reader or a kill never sees half of
// it however long it is; a failed or short write (ENOSPC, EFBIG, EIO) is truncated back to the last
// whole line and thrown as moe4d::Error naming the file and the reason. Not thread-safe.
class MetricsWriter {
 public:
  MetricsWriter() = default;
  MetricsWriter(const std::string& path, int64_t resume_step);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  MetricsWriter(MetricsWriter&& other) noexcept;
  MetricsWriter& operator=(MetricsWriter&& other) noexcept;

  void write(const nlohmann::json& record);
  const std::string& path() const { return path_; }
  // Lines dropped when the file was opened for a resume because they did not parse (a partial
  // last line).
  int dropped_partial_lines() const { return dropped_partial_; }

 private:
  std::string path_;
  int fd_ = -1;
  int dropped_partial_ = 0;
};

// "1h02m", "3m05s", "12s".
std::string format_duration(double seconds);
// "12.3k", "1.20M".
std::string format_count(double value);

}  // namespace moe4d
