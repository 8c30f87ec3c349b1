// data/atomic_file.h — files that appear complete or not at all.
//
// Writers put bytes into "<path>.tmp-<pid>", flush and fsync them, then rename over <path>
// (atomic on POSIX within one filesystem). A crash or error therefore never leaves a half-written
// tokenizer or shard header under the final name. Used by the token shard writer and `prepare`.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace moe4d {

// A file being written under a temporary name. commit() makes it visible as `path`; destroying an
// uncommitted AtomicFile removes the temporary. Move-only; not thread-safe.
class AtomicFile {
 public:
  // Throws moe4d::Error naming the file if the temporary cannot be created.
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  AtomicFile& operator=(AtomicFile&&) = delete;

  // Throws moe4d::Error naming the file on a write error (e.g. disk full).
  void write(const void* data, size_t bytes);
  // Flushes, fsyncs, closes and renames onto path(). Throws moe4d::Error on failure.
  void commit();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::string tmp_path_;
  std::FILE* file_ = nullptr;
};

// Writes `bytes` to `path` through an AtomicFile.
void write_file_atomically(const std::string& path, std::string_view bytes);

}  // namespace moe4d
