// data/atomic_file.cc — temporary file + fsync + rename.
#include "data/atomic_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace moe4d {

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  tmp_path_ = fmt::format("{}.tmp-{}", path_, static_cast<long>(::getpid()));
  file_ = std::fopen(tmp_path_.c_str(), "wb");
  if (!file_) fail("cannot create {}: {}", tmp_path_, std::strerror(errno));
}

AtomicFile::AtomicFile(AtomicFile&& other) noexcept
    : path_(std::move(other.path_)), tmp_path_(std::move(other.tmp_path_)), file_(other.file_) {
  other.file_ = nullptr;
}

AtomicFile::~AtomicFile() {
  if (file_) {
    std::fclose(file_);
    std::remove(tmp_path_.c_str());
  }
}

void AtomicFile::write(const void* data, size_t bytes) {
  if (bytes > 0 && std::fwrite(data, 1, bytes, file_) != bytes)
    fail("cannot write {}: {}", tmp_path_, std::strerror(errno));
}

void AtomicFile::commit() {
  bool ok = std::fflush(file_) == 0 && ::fsync(::fileno(file_)) == 0;
  int saved_errno = errno;
  if (std::fclose(file_) != 0 && ok) {
    ok = false;
    saved_errno = errno;
  }
  file_ = nullptr;
  if (!ok) {
    std::remove(tmp_path_.c_str());
    fail("cannot write {}: {}", tmp_path_, std::strerror(saved_errno));
  }
  if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    saved_errno = errno;
    std::remove(tmp_path_.c_str());
    fail("cannot rename {} to {}: {}", tmp_path_, path_, std::strerror(saved_errno));
  }
}

void write_file_atomically(const std::string& path, std::string_view bytes) {
  AtomicFile file(path);
  file.write(bytes.data(), bytes.size());
  file.commit();
}

}  // namespace moe4d
