// data/line_reader.cc — buffered line splitting over a decompressed byte stream.
#include "data/line_reader.h"

#include <cstring>

#include "core/error.h"

namespace moe4d {
namespace {
constexpr size_t kChunk = size_t(1) << 20;
}  // namespace

LineReader::LineReader(std::unique_ptr<ByteReader> bytes, std::string path)
    : bytes_(std::move(bytes)), path_(std::move(path)) {}

bool LineReader::fill() {
  if (eof_) return false;
  if (begin_ > 0) {  // move the unread tail to the front before reading more
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (buffer_.size() - end_ < kChunk) buffer_.resize(end_ + kChunk);
  size_t n = bytes_->read(buffer_.data() + end_, buffer_.size() - end_);
  if (n == 0) eof_ = true;
  end_ += n;
  return n > 0;
}

bool LineReader::next(std::string_view& line) {
  size_t scanned = begin_;
  for (;;) {
    const void* nl = std::memchr(buffer_.data() + scanned, '\n', end_ - scanned);
    if (nl) {
      size_t stop = static_cast<const char*>(nl) - buffer_.data() + 1;
      line = std::string_view(buffer_.data() + begin_, stop - begin_);
      break;
    }
    if (end_ - begin_ > kMaxLineBytes)
      fail("line {} of {} is longer than {} MiB (expected text with line breaks)", line_number_ + 1, path_,
           kMaxLineBytes >> 20);
    scanned = end_ - begin_;  // offsets relative to begin_, which fill() moves to 0
    if (!fill()) {
      if (begin_ == end_) return false;
      line = std::string_view(buffer_.data() + begin_, end_ - begin_);
      break;
    }
  }
  begin_ += line.size();
  consumed_ += static_cast<int64_t>(line.size());
  ++line_number_;
  return true;
}

std::string_view LineReader::peek(size_t count) {
  while (end_ - begin_ < count && fill()) {
  }
  return std::string_view(buffer_.data() + begin_, std::min(count, end_ - begin_));
}

bool looks_binary(std::string_view prefix) { return prefix.find('\0') != std::string_view::npos; }

}  // namespace moe4d
