#include "train/metrics.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

namespace moe4d {

namespace {

// write(2) of the whole buffer: one call unless the disk fills or a signal interrupts it (a short
// write is followed by one for the rest, which reports why); returns the errno of a failure.
int write_all_at_once(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return ENOSPC;
    done += static_cast<size_t>(n);
  }
  return 0;
}

}  // namespace

MetricsWriter::MetricsWriter(const std::string& path, int64_t resume_step) : path_(path) {
  namespace fs = std::filesystem;
  const fs::path parent = fs::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) {
    fs::create_directories(parent, ec);
    if (ec) fail("cannot create the directory {} of the metrics file: {}", parent.string(), ec.message());
  }
  if (resume_step > 0 && fs::exists(path)) {
    std::string kept;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
      auto record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (record.is_discarded() || !record.is_object()) {
        if (line.find_first_not_of(" \t\r") != std::string::npos) ++dropped_partial_;
        continue;
      }
      if (!record.contains("step") || !record["step"].is_number_integer() ||
          record["step"].get<int64_t>() <= resume_step)
        kept += line + "\n";
    }
    const std::string tmp = path + ".tmp";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) fail("cannot write metrics file {}: {}", tmp, std::strerror(errno));
    const int err = write_all_at_once(fd, kept);
    const int sync_err = err == 0 && ::fsync(fd) != 0 ? errno : 0;
    ::close(fd);
    if (err != 0 || sync_err != 0) {
      ::unlink(tmp.c_str());
      fail("cannot write metrics file {}: {}", tmp, std::strerror(err != 0 ? err : sync_err));
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
      fail("cannot replace metrics file {}: {}", path, std::strerror(errno));
  }
  const int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (resume_step > 0 ? 0 : O_TRUNC);
  fd_ = ::open(path.c_str(), flags, 0644);
  if (fd_ < 0) fail("cannot open metrics file {} for writing: {}", path, std::strerror(errno));
}

MetricsWriter::~MetricsWriter() {
  if (fd_ >= 0) ::close(fd_);
}

MetricsWriter::MetricsWriter(MetricsWriter&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)), dropped_partial_(other.dropped_partial_) {}

MetricsWriter& MetricsWriter::operator=(MetricsWriter&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    dropped_partial_ = other.dropped_partial_;
  }
  return *this;
}

void MetricsWriter::write(const nlohmann::json& record) {
  if (fd_ < 0) return;
  const std::string line = record.dump() + "\n";
  struct stat before{};
  const bool sized = ::fstat(fd_, &before) == 0;
  const int err = write_all_at_once(fd_, line);
  if (err == 0) return;
  // Keep the file a sequence of whole lines: cut off whatever part of this one reached it.
  // (Only a regular file can hold part of a line; a device or pipe has nothing to cut.)
  const bool cut = !sized || !S_ISREG(before.st_mode) || ::ftruncate(fd_, before.st_size) == 0;
  fail("cannot write metrics file {}: {}{}", path_, std::strerror(err),
       cut ? "" : " (and a partial line may remain at its end)");
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
