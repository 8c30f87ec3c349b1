// train/metrics.h — what a training step reports: the JSONL metrics file and the progress line.
#pragma once

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

namespace moe4d {

// Appends one JSON object per line. On resume, lines of steps after the resume point (written by the
// interrupted run) are dropped first, so the file always describes one consistent run.
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

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

// "1h02m", "3m05s", "12s".
std::string format_duration(double seconds);
// "12.3k", "1.20M".
std::string format_count(double value);

}  // namespace moe4d
