#include "train/metrics.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

namespace moe4d {

MetricsWriter::MetricsWriter(const std::string& path, int64_t resume_step) : path_(path) {
  namespace fs = std::filesystem;
  const fs::path parent = fs::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (resume_step > 0 && fs::exists(path)) {
    std::vector<std::string> kept;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
      auto record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (record.is_discarded() || !record.contains("step") || record["step"].get<int64_t>() <= resume_step)
        kept.push_back(line);
    }
    const std::string tmp = path + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      for (const std::string& line : kept) out << line << '\n';
      if (!out) fail("cannot write metrics file {}", tmp);
    }
    fs::rename(tmp, path);
  }
  file_ = std::fopen(path.c_str(), resume_step > 0 ? "a" : "w");
  if (!file_) fail("cannot open metrics file {}: {}", path, std::strerror(errno));
}

MetricsWriter::~MetricsWriter() {
  if (file_) std::fclose(file_);
}

MetricsWriter::MetricsWriter(MetricsWriter&& other) noexcept
    : path_(std::move(other.path_)), file_(std::exchange(other.file_, nullptr)) {}

MetricsWriter& MetricsWriter::operator=(MetricsWriter&& other) noexcept {
  if (this != &other) {
    if (file_) std::fclose(file_);
    path_ = std::move(other.path_);
    file_ = std::exchange(other.file_, nullptr);
  }
  return *this;
}

void MetricsWriter::write(const nlohmann::json& record) {
  if (!file_) return;
  std::string line = record.dump() + "\n";
  std::fputs(line.c_str(), file_);
  std::fflush(file_);
}

std::string format_duration(double seconds) {
  const long s = static_cast<long>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

std::string format_count(double value) {
  if (value >= 1e6) return fmt::format("{:.2f}M", value / 1e6);
  if (value >= 1e3) return fmt::format("{:.1f}k", value / 1e3);
  return fmt::format("{:.0f}", value);
}

}  // namespace moe4d
