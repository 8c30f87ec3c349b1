// data/megatron_indexed_dataset.cc — MMIDIDX index parsing/validation, checked token reads, writer.
#include "data/megatron_indexed_dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/check.h"
#include "core/error.h"
#include "data/tokenizer_record.h"

namespace moe4d {
namespace {

constexpr size_t kHeaderBytes = 9 + 8 + 1 + 8 + 8;  // magic, version, dtype, sequence and document counts

// Size in bytes of a Megatron dtype code's element; 0 for unknown codes.
size_t dtype_size(int code) {
  switch (code) {
    case 1: case 2: return 1;
    case 3: case 8: return 2;
    case 4: case 7: return 4;
    case 5: case 6: return 8;
    default: return 0;
  }
}

template <typename T>
T load(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Maps a whole file read-only; returns nullptr for an empty file.
const unsigned char* map_file(const std::string& path, size_t* bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open Megatron dataset file {}: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int saved = errno;
    ::close(fd);
    fail("cannot stat Megatron dataset file {}: {}", path, std::strerror(saved));
  }
  *bytes = static_cast<size_t>(st.st_size);
  void* map = nullptr;
  if (*bytes > 0) map = ::mmap(nullptr, *bytes, PROT_READ, MAP_SHARED, fd, 0);
  int saved = errno;
  ::close(fd);
  if (map == MAP_FAILED) fail("cannot memory-map Megatron dataset file {}: {}", path, std::strerror(saved));
  return static_cast<const unsigned char*>(map);
}

}  // namespace

std::string megatron_prefix(const std::string& path) {
  if (path.ends_with(".bin") || path.ends_with(".idx")) return path.substr(0, path.size() - 4);
  return path;
}

int megatron_dtype_code_for_vocab(int64_t vocab_size) { return vocab_size < 65500 ? 8 : 4; }

MegatronIndexedDataset::MegatronIndexedDataset(const std::string& path, int64_t id_limit)
    : prefix_(megatron_prefix(path)), id_limit_(id_limit) {
  if (const auto sidecar = read_megatron_tokenizer_sidecar(prefix_)) tokenizer_spec_ = sidecar->spec;
  const std::string idx_path = prefix_ + ".idx", bin_path = prefix_ + ".bin";
  idx_ = map_file(idx_path, &idx_bytes_);
  auto bad = [&](const std::string& what) { fail("Megatron index {}: {}", idx_path, what); };
  if (idx_bytes_ < kHeaderBytes)
    bad(fmt::format("{} bytes, shorter than the {}-byte header (expected a file written by Megatron's "
                    "IndexedDatasetBuilder)", idx_bytes_, kHeaderBytes));
  if (std::memcmp(idx_, kMegatronIndexHeader, sizeof kMegatronIndexHeader) != 0)
    bad("bad magic (expected the bytes MMIDIDX\\0\\0)");
  const uint64_t version = load<uint64_t>(idx_ + 9);
  if (version != 1) bad(fmt::format("version {}, expected 1", version));
  dtype_code_ = idx_[17];
  itemsize_ = dtype_size(dtype_code_);
  if (itemsize_ == 0) bad(fmt::format("unknown dtype code {} (expected 1..8)", dtype_code_));
  if (dtype_code_ == 6 || dtype_code_ == 7)
    bad(fmt::format("dtype code {} is a floating-point type, expected integer token ids", dtype_code_));
  const uint64_t sequences = load<uint64_t>(idx_ + 18), documents = load<uint64_t>(idx_ + 26);
  const unsigned __int128 arrays = (unsigned __int128)sequences * 12 + (unsigned __int128)documents * 8;
  const unsigned __int128 body = idx_bytes_ - kHeaderBytes;
  // The optional int8 sequence modes of multimodal datasets follow the document indices.
  if (body != arrays && body != arrays + sequences)
    bad(fmt::format("{} sequences and {} document indices need {} bytes after the header, the file has {}",
                    sequences, documents, uint64_t(arrays), uint64_t(body)));
  if (documents < 1) bad("no document indices (expected at least the leading 0)");
  sequence_count_ = int64_t(sequences);
  document_count_ = int64_t(documents);
  lengths_at_ = kHeaderBytes;
  pointers_at_ = lengths_at_ + 4 * sequences;
  documents_at_ = pointers_at_ + 8 * sequences;

  if (document_index(0) != 0) bad(fmt::format("document index 0 is {}, expected 0", document_index(0)));
  for (int64_t d = 1; d < document_count_; ++d)
    if (document_index(d) < document_index(d - 1) || document_index(d) > sequence_count_)
      bad(fmt::format("document index {} is {}, expected a non-decreasing value in [0, {}]", d, document_index(d),
                      sequence_count_));
  if (document_index(document_count_ - 1) != sequence_count_)
    bad(fmt::format("the last document index is {}, expected the sequence count {}",
                    document_index(document_count_ - 1), sequence_count_));
  int64_t expected_pointer = 0;
  for (int64_t s = 0; s < sequence_count_; ++s) {
    if (sequence_length(s) < 0) bad(fmt::format("sequence {} has negative length {}", s, sequence_length(s)));
    if (sequence_pointer(s) != expected_pointer)
      bad(fmt::format("sequence {} starts at byte {}, expected {} (only contiguous layouts are supported)", s,
                      sequence_pointer(s), expected_pointer));
    expected_pointer += int64_t(sequence_length(s)) * int64_t(itemsize_);
    num_tokens_ += sequence_length(s);
  }
  bin_ = map_file(bin_path, &bin_bytes_);
  if (bin_bytes_ != size_t(expected_pointer))
    fail("Megatron data file {} is {} bytes, but its index {} describes {} tokens of {} bytes = {} bytes", bin_path,
         bin_bytes_, idx_path, num_tokens_, itemsize_, expected_pointer);
  if (num_tokens_ == 0) fail("Megatron dataset {} holds no tokens", bin_path);
}

MegatronIndexedDataset::~MegatronIndexedDataset() {
  if (idx_) ::munmap(const_cast<unsigned char*>(idx_), idx_bytes_);
  if (bin_) ::munmap(const_cast<unsigned char*>(bin_), bin_bytes_);
}

int32_t MegatronIndexedDataset::sequence_length(int64_t i) const {
  MOE4D_CHECK(i >= 0 && i < sequence_count_);
  return load<int32_t>(idx_ + lengths_at_ + 4 * size_t(i));
}
int64_t MegatronIndexedDataset::sequence_pointer(int64_t i) const {
  MOE4D_CHECK(i >= 0 && i < sequence_count_);
  return load<int64_t>(idx_ + pointers_at_ + 8 * size_t(i));
}
int64_t MegatronIndexedDataset::document_index(int64_t i) const {
  MOE4D_CHECK(i >= 0 && i < document_count_);
  return load<int64_t>(idx_ + documents_at_ + 8 * size_t(i));
}

void MegatronIndexedDataset::read(int64_t offset, int64_t count, int32_t* out) const {
  MOE4D_CHECK(offset >= 0 && count >= 0 && offset + count <= num_tokens_);
  const unsigned char* p = bin_ + size_t(offset) * itemsize_;
  for (int64_t i = 0; i < count; ++i, p += itemsize_) {
    int64_t id = 0;
    switch (dtype_code_) {
      case 1: id = *p; break;
      case 2: id = static_cast<int8_t>(*p); break;
      case 3: id = load<int16_t>(p); break;
      case 4: id = load<int32_t>(p); break;
      case 5: id = load<int64_t>(p); break;
      case 8: id = load<uint16_t>(p); break;
      default: MOE4D_CHECK(false);
    }
    if (id < 0 || id >= id_limit_)
      fail("Megatron dataset {}: token {} is id {}, outside [0, {}) (model.vocab_size)", name(), offset + i, id,
           id_limit_);
    out[i] = static_cast<int32_t>(id);
  }
}

MegatronIndexedDatasetWriter::MegatronIndexedDatasetWriter(const std::string& prefix, int64_t vocab_size)
    : prefix_(megatron_prefix(prefix)),
      vocab_size_(vocab_size),
      dtype_code_(megatron_dtype_code_for_vocab(vocab_size)),
      bin_(prefix_ + ".bin") {
  if (vocab_size <= 0) fail("Megatron dataset {}: vocab size {} must be positive", prefix_, vocab_size);
}

void MegatronIndexedDatasetWriter::add_document(std::span<const int> ids) {
  const size_t item = dtype_code_ == 8 ? 2 : 4;
  staging_.resize(ids.size() * item);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size_)
      fail("Megatron dataset {}: token id {} is outside [0, {})", prefix_, ids[i], vocab_size_);
    if (item == 2) {
      uint16_t v = static_cast<uint16_t>(ids[i]);
      std::memcpy(&staging_[i * 2], &v, 2);
    } else {
      int32_t v = ids[i];
      std::memcpy(&staging_[i * 4], &v, 4);
    }
  }
  if (ids.size() > size_t(INT32_MAX)) fail("Megatron dataset {}: a document of {} tokens exceeds int32", prefix_, ids.size());
  bin_.write(staging_.data(), staging_.size());
  lengths_.push_back(static_cast<int32_t>(ids.size()));
  num_tokens_ += static_cast<int64_t>(ids.size());
}

void MegatronIndexedDatasetWriter::finish() {
  if (num_tokens_ == 0) fail("Megatron dataset {}: no tokens were written", prefix_);
  bin_.commit();
  AtomicFile idx(prefix_ + ".idx");
  const uint64_t version = 1, sequences = lengths_.size(), documents = lengths_.size() + 1;
  const uint8_t code = static_cast<uint8_t>(dtype_code_);
  idx.write(kMegatronIndexHeader, sizeof kMegatronIndexHeader);
  idx.write(&version, 8);
  idx.write(&code, 1);
  idx.write(&sequences, 8);
  idx.write(&documents, 8);
  idx.write(lengths_.data(), lengths_.size() * 4);
  const int64_t item = dtype_code_ == 8 ? 2 : 4;
  std::vector<int64_t> chunk;
  chunk.reserve(1 << 16);
  auto flush = [&] {
    idx.write(chunk.data(), chunk.size() * 8);
    chunk.clear();
  };
  int64_t pointer = 0;
  for (int32_t length : lengths_) {  // sequence pointers: byte offsets in the .bin
    chunk.push_back(pointer);
    pointer += int64_t(length) * item;
    if (chunk.size() == chunk.capacity()) flush();
  }
  flush();
  for (uint64_t d = 0; d < documents; ++d) {  // one sequence per document: 0, 1, ..., n
    chunk.push_back(int64_t(d));
    if (chunk.size() == chunk.capacity()) flush();
  }
  flush();
  idx.commit();
}

}  // namespace moe4d
