// data/compressed_reader.h — streams the bytes of a corpus file, decompressing .gz / .xz / .zst.
//
// `prepare` reads corpora much larger than memory, so a file is never loaded whole: a ByteReader
// hands out the (decompressed) bytes in caller-sized pieces. Compression is chosen by the file's
// last extension and confirmed by the stream's magic bytes; the decoders are the Debian system
// libraries (zlib, liblzma, libzstd). Concatenated members/frames (as `cat a.gz b.gz` or pigz
// write them) are read as one stream. A truncated or corrupt stream is a moe4d::Error naming the
// file, the format and the decompressed offset reached — never a silent short read.
//
// Move-only; one reader is used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace moe4d {

enum class Compression { kNone, kGzip, kXz, kZstd };

// By the last extension: ".gz" -> kGzip, ".xz" -> kXz, ".zst" -> kZstd, anything else kNone.
Compression compression_of(std::string_view path);
const char* compression_name(Compression compression);  // "none", "gzip", "xz", "zstd"
// `path` without a compression extension: "a.jsonl.gz" -> "a.jsonl" (so the format can be chosen).
std::string strip_compression_extension(std::string_view path);

class ByteReader {
 public:
  virtual ~ByteReader() = default;
  // Fills up to `capacity` bytes; returns how many (0 only at the end of the stream).
  // Throws moe4d::Error naming the file for read errors and corrupt or truncated streams.
  virtual size_t read(char* out, size_t capacity) = 0;
  // Bytes consumed from the file on disk so far (compressed bytes for compressed files): the
  // progress bar's measure, since a compressed file's decompressed size is unknown up front.
  virtual int64_t file_bytes_read() const = 0;
};

// Opens `path` with the decoder its extension names. Throws moe4d::Error if the file cannot be
// opened or its first bytes are not that format's magic number.
std::unique_ptr<ByteReader> open_byte_reader(const std::string& path);

}  // namespace moe4d
