// checkpoint/output_file.cc — POSIX implementation of OutputFile and fsync_directory.
#include "checkpoint/output_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.h"

namespace moe4d {

OutputFile::OutputFile(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("cannot create {}: {}", path_, std::strerror(errno));
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
}

OutputFile::OutputFile(OutputFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(other.fd_), bytes_(other.bytes_), hasher_(std::move(other.hasher_)) {
  other.fd_ = -1;
}

void OutputFile::write(const void* data, size_t bytes) {
  if (fd_ < 0) fail("cannot write {}: the file is already finished", path_);
  hasher_.update(data, bytes);
  const char* p = static_cast<const char*>(data);
  size_t left = bytes;
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("cannot write {}: {}", path_, std::strerror(errno));
    p += n;
    left -= static_cast<size_t>(n);
  }
  bytes_ += bytes;
}

std::string OutputFile::finish() {
  if (fd_ < 0) fail("cannot finish {}: the file is already finished", path_);
  const int fd = fd_;
  fd_ = -1;
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    fail("cannot fsync {}: {}", path_, std::strerror(err));
  }
  if (::close(fd) != 0) fail("cannot close {}: {}", path_, std::strerror(errno));
  return hasher_.hex_digest();
}

void fsync_directory(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail("cannot open directory {}: {}", path, std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) fail("cannot fsync directory {}: {}", path, std::strerror(err));
}

}  // namespace moe4d
