// checkpoint/output_file.h — a file written once, front to back, hashed as it is written.
//
// Checkpoint files are streamed straight from tensor memory to disk; OutputFile computes their
// SHA-256 and size on the way (no second pass, no second copy) and makes them durable with fsync
// before they are renamed into place. fsync_directory makes a rename or create in a directory
// durable. Failures (disk full, permissions) throw moe4d::Error naming the file.
//
// Not thread-safe; move-only. Abandoning an OutputFile without finish() closes the descriptor and
// leaves the partial file for the owner (CheckpointWriter removes its whole temporary directory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/sha256.h"

namespace moe4d {

class OutputFile {
 public:
  // Creates (or truncates) `path` for writing.
  explicit OutputFile(std::string path);
  ~OutputFile();
  OutputFile(OutputFile&& other) noexcept;
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  OutputFile& operator=(OutputFile&&) = delete;

  void write(const void* data, size_t bytes);
  // fsyncs and closes the file; returns the lowercase hex SHA-256 of everything written.
  std::string finish();

  const std::string& path() const { return path_; }
  uint64_t bytes_written() const { return bytes_; }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t bytes_ = 0;
  Sha256 hasher_;
};

// fsync(2) on a directory, so that entries created or renamed in it survive a power loss.
void fsync_directory(const std::string& path);

}  // namespace moe4d
