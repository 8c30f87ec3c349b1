// data/compressed_reader.cc — plain, gzip (zlib), xz (liblzma) and zstd (libzstd) byte streams.
#include "data/compressed_reader.h"

#include <lzma.h>
#include <zlib.h>
#include <zstd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace moe4d {
namespace {

constexpr size_t kInputChunk = 1 << 17;

// The raw file, read in chunks; owns the FILE*.
class FileInput {
 public:
  explicit FileInput(const std::string& path) : path_(path), file_(std::fopen(path.c_str(), "rb")) {
    if (!file_) fail("cannot read corpus file {}: {}", path, std::strerror(errno));
  }
  ~FileInput() { std::fclose(file_); }
  FileInput(const FileInput&) = delete;
  FileInput& operator=(const FileInput&) = delete;

  size_t read(char* out, size_t capacity) {
    size_t n = std::fread(out, 1, capacity, file_);
    if (n < capacity && std::ferror(file_)) fail("error while reading corpus file {}: {}", path_, std::strerror(errno));
    bytes_ += static_cast<int64_t>(n);
    return n;
  }
  int64_t bytes() const { return bytes_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* file_;
  int64_t bytes_ = 0;
};

class PlainReader final : public ByteReader {
 public:
  explicit PlainReader(const std::string& path) : in_(path) {}
  size_t read(char* out, size_t capacity) override { return in_.read(out, capacity); }
  int64_t file_bytes_read() const override { return in_.bytes(); }

 private:
  FileInput in_;
};

// Shared shape of the three decoders: a compressed input buffer refilled from the file, and the
// decompressed bytes produced so far (for error messages).
class DecoderBase : public ByteReader {
 protected:
  explicit DecoderBase(const std::string& path) : in_(path), buffer_(kInputChunk) {}
  // Refills the input buffer once it is used up; false at the end of the file.
  bool refill() {
    if (pos_ < size_) return true;
    size_ = in_.read(buffer_.data(), buffer_.size());
    pos_ = 0;
    return size_ > 0;
  }
  // Reads the first bytes to check the magic number (they stay in the buffer for the decoder).
  void expect_magic(std::string_view magic, const char* format) {
    while (size_ < magic.size()) {
      size_t n = in_.read(buffer_.data() + size_, magic.size() - size_);
      if (n == 0) break;
      size_ += n;
    }
    if (size_ < magic.size() || std::memcmp(buffer_.data(), magic.data(), magic.size()) != 0)
      fail("corpus file {} is not {} data (its extension says so, but the magic bytes differ)", in_.path(), format);
  }
  [[noreturn]] void corrupt(const char* format, const std::string& detail) const {
    fail("corpus file {} is a corrupt or truncated {} stream after {} decompressed bytes: {}", in_.path(), format,
         produced_, detail);
  }
  int64_t file_bytes_read() const override { return in_.bytes(); }

  FileInput in_;
  std::vector<char> buffer_;
  size_t pos_ = 0, size_ = 0;
  int64_t produced_ = 0;
};

class GzipReader final : public DecoderBase {
 public:
  explicit GzipReader(const std::string& path) : DecoderBase(path) {
    expect_magic("\x1f\x8b", "gzip");
    std::memset(&z_, 0, sizeof z_);
    if (inflateInit2(&z_, 15 + 16) != Z_OK) fail("cannot start the gzip decoder for {}", path);
  }
  ~GzipReader() override { inflateEnd(&z_); }

  size_t read(char* out, size_t capacity) override {
    size_t written = 0;
    while (written < capacity) {
      if (member_done_) {
        // Another gzip member may follow (concatenated files); anything else after a member is
        // ignored by gzip(1) only when it is zero padding, so we require a member or the end.
        if (!refill()) break;
        if (inflateReset(&z_) != Z_OK) corrupt("gzip", "cannot reset the decoder");
        member_done_ = false;
      }
      if (!refill()) {
        if (!member_done_) corrupt("gzip", "unexpected end of file");
        break;
      }
      const size_t before_pos = pos_;
      z_.next_in = reinterpret_cast<Bytef*>(buffer_.data() + pos_);
      z_.avail_in = static_cast<uInt>(size_ - pos_);
      z_.next_out = reinterpret_cast<Bytef*>(out + written);
      z_.avail_out = static_cast<uInt>(capacity - written);
      int rc = inflate(&z_, Z_NO_FLUSH);
      pos_ = size_ - z_.avail_in;
      const size_t got = (capacity - written) - z_.avail_out;
      written += got;
      produced_ += static_cast<int64_t>(got);
      if (rc == Z_STREAM_END) {
        member_done_ = true;
      } else if (rc != Z_OK && !(rc == Z_BUF_ERROR && (got > 0 || pos_ > before_pos))) {
        corrupt("gzip", z_.msg ? z_.msg : fmt::format("zlib error {}", rc));
      }
    }
    return written;
  }

 private:
  z_stream z_;
  bool member_done_ = false;
};

class XzReader final : public DecoderBase {
 public:
  explicit XzReader(const std::string& path) : DecoderBase(path) {
    expect_magic(std::string_view("\xFD" "7zXZ\0", 6), "xz");
    if (lzma_stream_decoder(&s_, UINT64_MAX, LZMA_CONCATENATED) != LZMA_OK)
      fail("cannot start the xz decoder for {}", path);
  }
  ~XzReader() override { lzma_end(&s_); }

  size_t read(char* out, size_t capacity) override {
    size_t written = 0;
    while (written < capacity && !done_) {
      lzma_action action = refill() ? LZMA_RUN : LZMA_FINISH;
      s_.next_in = reinterpret_cast<const uint8_t*>(buffer_.data() + pos_);
      s_.avail_in = size_ - pos_;
      s_.next_out = reinterpret_cast<uint8_t*>(out + written);
      s_.avail_out = capacity - written;
      lzma_ret rc = lzma_code(&s_, action);
      pos_ = size_ - s_.avail_in;
      const size_t got = (capacity - written) - s_.avail_out;
      written += got;
      produced_ += static_cast<int64_t>(got);
      if (rc == LZMA_STREAM_END) {
        done_ = true;
      } else if (rc != LZMA_OK) {
        corrupt("xz", rc == LZMA_BUF_ERROR ? "unexpected end of file" : fmt::format("liblzma error {}", int(rc)));
      }
    }
    return written;
  }

 private:
  lzma_stream s_ = LZMA_STREAM_INIT;
  bool done_ = false;
};

class ZstdReader final : public DecoderBase {
 public:
  explicit ZstdReader(const std::string& path) : DecoderBase(path), d_(ZSTD_createDStream()) {
    expect_magic("\x28\xB5\x2F\xFD", "zstd");
    if (!d_ || ZSTD_isError(ZSTD_initDStream(d_))) fail("cannot start the zstd decoder for {}", path);
  }
  ~ZstdReader() override { ZSTD_freeDStream(d_); }

  size_t read(char* out, size_t capacity) override {
    ZSTD_outBuffer output{out, capacity, 0};
    while (output.pos < output.size) {
      if (!refill()) {
        // A frame that was started but not finished means the file was cut short.
        if (frame_open_) corrupt("zstd", "unexpected end of file");
        break;
      }
      ZSTD_inBuffer input{buffer_.data() + pos_, size_ - pos_, 0};
      const size_t before = output.pos;
      size_t rc = ZSTD_decompressStream(d_, &output, &input);
      pos_ += input.pos;
      produced_ += static_cast<int64_t>(output.pos - before);
      if (ZSTD_isError(rc)) corrupt("zstd", ZSTD_getErrorName(rc));
      frame_open_ = rc != 0;  // 0: a frame was completely decoded and flushed
    }
    return output.pos;
  }

 private:
  ZSTD_DStream* d_;
  bool frame_open_ = true;
};

}  // namespace

Compression compression_of(std::string_view path) {
  if (path.ends_with(".gz")) return Compression::kGzip;
  if (path.ends_with(".xz")) return Compression::kXz;
  if (path.ends_with(".zst")) return Compression::kZstd;
  return Compression::kNone;
}

const char* compression_name(Compression compression) {
  switch (compression) {
    case Compression::kGzip: return "gzip";
    case Compression::kXz: return "xz";
    case Compression::kZstd: return "zstd";
    case Compression::kNone: break;
  }
  return "none";
}

std::string strip_compression_extension(std::string_view path) {
  for (std::string_view ext : {".gz", ".xz", ".zst"})
    if (path.ends_with(ext)) return std::string(path.substr(0, path.size() - ext.size()));
  return std::string(path);
}

std::unique_ptr<ByteReader> open_byte_reader(const std::string& path) {
  switch (compression_of(path)) {
    case Compression::kGzip: return std::make_unique<GzipReader>(path);
    case Compression::kXz: return std::make_unique<XzReader>(path);
    case Compression::kZstd: return std::make_unique<ZstdReader>(path);
    case Compression::kNone: break;
  }
  return std::make_unique<PlainReader>(path);
}

}  // namespace moe4d
