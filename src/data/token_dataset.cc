// data/token_dataset.cc — TokenDataset: header validation, mmap of the .bin, checked reads.
#include "data/token_dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/check.h"
#include "core/error.h"
#include "core/sha256.h"

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

}  // namespace

TokenDataset TokenDataset::open(const std::string& path, bool verify) {
  TokenDataset dataset;
  dataset.paths_ = token_shard_paths(path);
  const TokenShardPaths& paths = dataset.paths_;
  dataset.header_ = read_token_shard_header(paths.json);
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
         static_cast<uint64_t>(st.st_size) < expected ? "truncated" : "the .bin does not belong to this header");
  }
  void* map = ::mmap(nullptr, expected, PROT_READ, MAP_SHARED, fd, 0);
  int saved = errno;
  ::close(fd);  // the mapping keeps the file alive
  if (map == MAP_FAILED) fail("cannot memory-map token shard {}: {}", paths.bin, std::strerror(saved));
  dataset.data_ = static_cast<const unsigned char*>(map);
  dataset.mapped_bytes_ = expected;

  if (verify) {
    dataset.verify_checksum();
    dataset.validate_tokens();
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
  const size_t item = token_dtype_size(header_.dtype);
  int64_t bad_count = 0;
  int64_t first_bad = -1;
  uint64_t first_value = 0;
  for (int64_t i = 0; i < header_.num_tokens; ++i) {
    uint64_t id = 0;
    if (item == 2) {
      uint16_t v;
      std::memcpy(&v, data_ + i * 2, 2);
      id = v;
    } else {
      uint32_t v;
      std::memcpy(&v, data_ + i * 4, 4);
      id = v;
    }
    if (id >= static_cast<uint64_t>(header_.vocab_size)) {
      if (first_bad < 0) {
        first_bad = i;
        first_value = id;
      }
      ++bad_count;
    }
  }
  if (bad_count > 0)
    fail("token shard {}: {} of {} tokens are >= vocab_size {} from its header (first: token {} at index {})",
         paths_.bin, bad_count, header_.num_tokens, header_.vocab_size, first_value, first_bad);
}

void TokenDataset::verify_checksum() const {
  std::string actual = sha256_hex(data_, mapped_bytes_);
  if (actual != header_.sha256)
    fail("token shard {}: sha256 is {}, but its header {} says {} (corrupt or replaced .bin)", paths_.bin, actual,
         paths_.json, header_.sha256);
}

}  // namespace moe4d
