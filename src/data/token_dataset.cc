// data/token_dataset.cc — TokenDataset: header validation, mmap of the .bin, checked reads.
#include "data/token_dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "core/check.h"
#include "core/error.h"
#include "core/sha256.h"
#include "data/atomic_file.h"

namespace moe4d {
namespace {

// Decodes ids [offset, offset+count) of a mapping and reports the first id >= vocab_size.
template <typename T>
int64_t copy_ids(const unsigned char* data, int64_t offset, int64_t count, int64_t vocab_size, int32_t* out) {
  const T* ids = reinterpret_cast<const T*>(data) + offset;
  int64_t bad = -1;
  for (int64_t i = 0; i < count; ++i) {
    out[i] = static_cast<int32_t>(ids[i]);
    if (static_cast<int64_t>(ids[i]) >= vocab_size && bad < 0) bad = i;
  }
  return bad;
}

// The marker that a shard passed verify_payload(): next to the .bin, keyed by what would change if
// either file were replaced or rewritten (the .bin's size, mtime and inode, the header's own hash
// and the payload hash it promises). A marker that does not match byte for byte is ignored.
constexpr const char* kVerifiedSuffix = ".verified";
constexpr int64_t kRacySeconds = 2;

std::string verified_marker(const struct stat& st, const std::string& header_hash, const TokenShardHeader& header) {
  return fmt::format(
      "{{\"format\": \"moe4d-tokens-verified\", \"bin_bytes\": {}, \"bin_mtime_ns\": {}, \"bin_inode\": {}, "
      "\"header_sha256\": \"{}\", \"sha256\": \"{}\", \"vocab_size\": {}}}\n",
      static_cast<int64_t>(st.st_size), static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
      static_cast<uint64_t>(st.st_ino), header_hash, header.sha256, header.vocab_size);
}

// The contents of a small file, or "" if it is absent, unreadable or larger than 4 KiB.
std::string read_small_file(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (!file) return "";
  char buffer[4096];
  const size_t n = std::fread(buffer, 1, sizeof(buffer), file);
  std::fclose(file);
  return n < sizeof(buffer) ? std::string(buffer, n) : std::string();
}

}  // namespace

TokenDataset TokenDataset::open(const std::string& path, bool verify) {
  TokenDataset dataset;
  dataset.paths_ = token_shard_paths(path);
  const TokenShardPaths& paths = dataset.paths_;
  const std::string header_text = read_token_shard_header_text(paths.json);
  dataset.header_ = parse_token_shard_header(header_text, paths.json);
  const TokenShardHeader& header = dataset.header_;

  int fd = ::open(paths.bin.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open token shard {}: {}", paths.bin, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int saved = errno;
    ::close(fd);
    fail("cannot stat token shard {}: {}", paths.bin, std::strerror(saved));
  }
  const size_t itemsize = token_dtype_size(header.dtype);
  const uint64_t expected = static_cast<uint64_t>(header.num_tokens) * itemsize;
  if (static_cast<uint64_t>(st.st_size) != expected) {
    ::close(fd);
    fail("token shard {} is {} bytes, but its header {} says {} {} tokens = {} bytes ({})", paths.bin,
         static_cast<int64_t>(st.st_size), paths.json, header.num_tokens, token_dtype_name(header.dtype), expected,
         // Shorter need not mean cut short: another shard (a valid.bin) copied over this one is too.
         static_cast<uint64_t>(st.st_size) < expected
             ? "size mismatch: the header describes another file; the .bin was cut short or replaced by another "
               "shard, e.g. a valid.bin copied over a train.bin"
             : "size mismatch: the header describes another file; the .bin was replaced by another shard");
  }
  void* map = ::mmap(nullptr, expected, PROT_READ, MAP_SHARED, fd, 0);
  int saved = errno;
  ::close(fd);  // the mapping keeps the file alive
  if (map == MAP_FAILED) fail("cannot memory-map token shard {}: {}", paths.bin, std::strerror(saved));
  dataset.data_ = static_cast<const unsigned char*>(map);
  dataset.mapped_bytes_ = expected;

  if (verify) {
    const std::string marker = verified_marker(st, sha256_hex(header_text.data(), header_text.size()), header);
    if (read_small_file(paths.bin + kVerifiedSuffix) != marker) {
      dataset.verify_payload();
      // Best effort: a read-only data directory only means the next open hashes again. A .bin
      // modified in the last seconds is not marked: file times are coarse (a few ms), so a rewrite
      // within the same tick would keep size, mtime and inode and inherit a stale marker.
      if (std::time(nullptr) - st.st_mtim.tv_sec > kRacySeconds) {
        try {
          write_file_atomically(paths.bin + kVerifiedSuffix, marker);
        } catch (const Error&) {
        }
      }
    }
  }
  return dataset;
}

TokenDataset::~TokenDataset() { release(); }

TokenDataset::TokenDataset(TokenDataset&& other) noexcept
    : paths_(std::move(other.paths_)),
      header_(std::move(other.header_)),
      data_(other.data_),
      mapped_bytes_(other.mapped_bytes_) {
  other.data_ = nullptr;
  other.mapped_bytes_ = 0;
}

TokenDataset& TokenDataset::operator=(TokenDataset&& other) noexcept {
  if (this != &other) {
    release();
    paths_ = std::move(other.paths_);
    header_ = std::move(other.header_);
    data_ = other.data_;
    mapped_bytes_ = other.mapped_bytes_;
    other.data_ = nullptr;
    other.mapped_bytes_ = 0;
  }
  return *this;
}

void TokenDataset::release() {
  if (data_) ::munmap(const_cast<unsigned char*>(data_), mapped_bytes_);
  data_ = nullptr;
  mapped_bytes_ = 0;
}

std::string TokenDataset::tokenizer_spec() const {
  const std::string& spec = header_.tokenizer;
  if (spec == "bytes" || spec.empty() || std::filesystem::path(spec).is_absolute()) return spec;
  return (std::filesystem::path(paths_.json).parent_path() / spec).string();
}

void TokenDataset::read(int64_t offset, int64_t count, int32_t* out) const {
  MOE4D_CHECK_MSG(offset >= 0 && count >= 0 && offset + count <= header_.num_tokens, "read [{}, {}) of {} tokens in {}",
                  offset, offset + count, header_.num_tokens, paths_.bin);
  int64_t bad = header_.dtype == TokenDType::kUint16
                    ? copy_ids<uint16_t>(data_, offset, count, header_.vocab_size, out)
                    : copy_ids<uint32_t>(data_, offset, count, header_.vocab_size, out);
  if (bad >= 0)
    fail(
        "token shard {}: token {} at index {} is >= vocab_size {} from its header (corrupt shard, or written "
        "with another tokenizer)",
        paths_.bin, static_cast<uint32_t>(out[bad]), offset + bad, header_.vocab_size);
}

int32_t TokenDataset::token(int64_t index) const {
  int32_t id = 0;
  read(index, 1, &id);
  return id;
}

void TokenDataset::validate_tokens() const {
  report_out_of_vocab(scan_token_payload(data_, mapped_bytes_, header_.dtype, header_.vocab_size));
}

void TokenDataset::verify_checksum() const { report_sha256(sha256_hex(data_, mapped_bytes_)); }

void TokenDataset::verify_payload() const {
  // Each chunk's pages are dropped once hashed (the file stays in the page cache; training faults
  // back in what it reads), so verifying a shard larger than memory never makes it all resident.
  const auto drop = [this](size_t offset, size_t n) {
    ::madvise(const_cast<unsigned char*>(data_) + offset, n, MADV_DONTNEED);
  };
  const TokenPayloadCheck check = scan_token_payload(data_, mapped_bytes_, header_.dtype, header_.vocab_size, drop);
  report_sha256(check.sha256);
  report_out_of_vocab(check);
}

void TokenDataset::report_sha256(const std::string& actual) const {
  if (actual != header_.sha256)
    fail("token shard {}: sha256 is {}, but its header {} says {} (corrupt or replaced .bin)", paths_.bin, actual,
         paths_.json, header_.sha256);
}

void TokenDataset::report_out_of_vocab(const TokenPayloadCheck& check) const {
  if (check.out_of_vocab > 0)
    fail("token shard {}: {} of {} tokens are >= vocab_size {} from its header (first: token {} at index {})",
         paths_.bin, check.out_of_vocab, header_.num_tokens, header_.vocab_size, check.first_bad_id,
         check.first_bad_index);
}

}  // namespace moe4d
