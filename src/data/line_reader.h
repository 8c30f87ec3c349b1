// data/line_reader.h — lines of a ByteReader (data/compressed_reader.h), with bounded memory.
//
// Lines are handed out as views that stay valid until the next call; each keeps its '\n' (the last
// line of a stream may lack it). A line longer than kMaxLineBytes is a moe4d::Error naming the
// file and line: memory stays bounded whatever the input. Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "data/compressed_reader.h"

namespace moe4d {

inline constexpr size_t kMaxLineBytes = size_t(64) << 20;

class LineReader {
 public:
  LineReader(std::unique_ptr<ByteReader> bytes, std::string path);

  // The next line, or false at the end of the stream.
  bool next(std::string_view& line);
  // 1-based number of the line last returned.
  int64_t line_number() const { return line_number_; }
  // Up to `count` bytes from the current position without consuming them (binary detection).
  std::string_view peek(size_t count);

  const std::string& path() const { return path_; }
  int64_t file_bytes_read() const { return bytes_->file_bytes_read(); }
  int64_t bytes_consumed() const { return consumed_; }  // decompressed bytes handed out as lines

 private:
  bool fill();  // reads more bytes after the unread part; false at the end

  std::unique_ptr<ByteReader> bytes_;
  std::string path_;
  std::string buffer_;
  size_t begin_ = 0, end_ = 0;  // unread bytes are buffer_[begin_, end_)
  bool eof_ = false;
  int64_t line_number_ = 0;
  int64_t consumed_ = 0;
};

// True if `prefix` (the first bytes of a file) looks binary: it holds a NUL byte, as compiled
// objects, images, archives and index files do and text in any ASCII-compatible encoding never does.
bool looks_binary(std::string_view prefix);

}  // namespace moe4d
