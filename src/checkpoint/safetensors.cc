// checkpoint/safetensors.cc — streaming safetensors writer and validating mmap reader.
#include "checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <numeric>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace moe4d {
namespace {

constexpr const char* kMetadataKey = "__metadata__";
constexpr size_t kChunkBytes = size_t{16} << 20;  // hash-then-write granularity (stays in cache)
constexpr size_t kStagingBytes = size_t{1} << 20;  // gather buffer for strided views

// Writes the elements of `t` in row-major order. Contiguous views go straight from their memory;
// strided ones are gathered row by row (or element by element) through a small staging buffer.
void write_tensor_data(OutputFile& out, const Tensor& t) {
  const char* base = static_cast<const char*>(t.data);
  if (t.is_contiguous()) {
    for (size_t done = 0; done < t.nbytes(); done += kChunkBytes)
      out.write(base + done, std::min(kChunkBytes, t.nbytes() - done));
    return;
  }
  const int nd = t.shape.ndim();  // >= 1: a 0-d view is always contiguous
  const size_t elem = dtype_size(t.dtype);
  const int64_t row_len = t.shape[nd - 1];
  const int64_t rows = row_len == 0 ? 0 : t.numel() / row_len;
  std::vector<char> staging(std::max(kStagingBytes, elem));
  size_t used = 0;
  const auto flush = [&] {
    out.write(staging.data(), used);
    used = 0;
  };
  std::array<int64_t, Shape::kMaxDims> index{};
  for (int64_t r = 0; r < rows; ++r) {
    int64_t offset = 0;
    for (int i = 0; i < nd - 1; ++i) offset += index[i] * t.strides[i];
    const char* row = base + offset * static_cast<int64_t>(elem);
    const size_t row_bytes = static_cast<size_t>(row_len) * elem;
    if (t.strides[nd - 1] == 1 && row_bytes <= staging.size()) {
      if (used + row_bytes > staging.size()) flush();
      std::memcpy(staging.data() + used, row, row_bytes);
      used += row_bytes;
    } else if (t.strides[nd - 1] == 1) {  // a long contiguous row: write it directly
      flush();
      out.write(row, row_bytes);
    } else {
      for (int64_t j = 0; j < row_len; ++j) {
        if (used + elem > staging.size()) flush();
        std::memcpy(staging.data() + used, row + j * t.strides[nd - 1] * static_cast<int64_t>(elem), elem);
        used += elem;
      }
    }
    for (int i = nd - 2; i >= 0; --i) {  // next row: advance the outer multi-index
      if (++index[i] < t.shape[i]) break;
      index[i] = 0;
    }
  }
  flush();
}

bool parse_dtype(const std::string& name, DType& out) {
  for (DType d : {DType::kF32, DType::kBF16, DType::kF16, DType::kF64, DType::kI32, DType::kI64, DType::kU8,
                  DType::kU16, DType::kU32}) {
    if (name == dtype_name(d)) {
      out = d;
      return true;
    }
  }
  return false;
}

struct Span {
  uint64_t begin;
  uint64_t end;
  std::string name;
};

}  // namespace

void write_safetensors_header(OutputFile& out, std::string header_json) {
  header_json.append((8 - header_json.size() % 8) % 8, ' ');
  unsigned char length[8];
  for (int i = 0; i < 8; ++i)
    length[i] = static_cast<unsigned char>(static_cast<uint64_t>(header_json.size()) >> (8 * i));
  out.write(length, sizeof(length));
  out.write(header_json.data(), header_json.size());
}

void write_safetensors(OutputFile& out, const NamedTensors& tensors, const SafetensorsMetadata& metadata) {
  std::set<std::string> names;
  for (const auto& [name, t] : tensors) {
    if (name.empty() || name == kMetadataKey)
      fail("{}: tensor name '{}' is reserved or empty, expected a non-empty name other than {}", out.path(), name,
           kMetadataKey);
    if (!names.insert(name).second) fail("{}: tensor '{}' is given twice, expected unique names", out.path(), name);
    for (int i = 0; i < t.shape.ndim(); ++i) MOE4D_CHECK_GE(t.shape[i], 0);
  }
  // Larger elements first: with an 8-aligned data section every tensor is then aligned to its dtype.
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return dtype_size(tensors[a].second.dtype) > dtype_size(tensors[b].second.dtype);
  });

  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (size_t i : order) {
    const Tensor& t = tensors[i].second;
    header[tensors[i].first] = {
        {"dtype", dtype_name(t.dtype)}, {"shape", t.shape.dims()}, {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  write_safetensors_header(out, header.dump());
  for (size_t i : order) write_tensor_data(out, tensors[i].second);
}

void save_safetensors(const std::string& path, const NamedTensors& tensors, const SafetensorsMetadata& metadata) {
  OutputFile out(path);
  write_safetensors(out, tensors, metadata);
  out.finish();
}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot read safetensors file {}: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail("cannot read safetensors file {}: {}", path, std::strerror(err));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    fail("{}: file is {} bytes, expected at least the 8-byte header length of a safetensors file", path, size);
  }
  void* mapping = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_err = errno;
  ::close(fd);
  if (mapping == MAP_FAILED) fail("cannot map safetensors file {}: {}", path, std::strerror(map_err));

  SafetensorsFile file;  // owns the mapping from here on, also when validation throws
  file.path_ = path;
  file.mapping_ = mapping;
  file.mapping_bytes_ = size;
  const auto* bytes = static_cast<const unsigned char*>(mapping);
  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) header_len |= static_cast<uint64_t>(bytes[i]) << (8 * i);
  if (header_len > size - 8)
    fail("{}: header length {} exceeds the {} bytes that follow it (truncated or not a safetensors file)", path,
         header_len, size - 8);

  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes + 8, bytes + 8 + header_len);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for a number overflow
    fail("{}: header is not valid JSON: {}", path, e.what());
  }
  if (!header.is_object()) fail("{}: header is {}, expected a JSON object", path, header.type_name());

  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = size - data_start;
  std::vector<Span> spans;
  for (const auto& [name, entry] : header.items()) {
    if (name == kMetadataKey) {
      if (!entry.is_object()) fail("{}: {} is {}, expected an object of strings", path, kMetadataKey, entry.type_name());
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string())
          fail("{}: {} entry '{}' is {}, expected a string", path, kMetadataKey, key, value.type_name());
        file.metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    const auto bad = [&, tensor = std::string(name)](const std::string& what) {
      fail("{}: tensor '{}': {}", path, tensor, what);
    };
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets"))
      bad("expected an object with dtype, shape and data_offsets");
    DType dtype{};
    if (!entry["dtype"].is_string() || !parse_dtype(entry["dtype"].get<std::string>(), dtype))
      bad(fmt::format("unknown dtype {}, expected one of F32, BF16, F16, F64, I32, I64, U8, U16, U32",
                      entry["dtype"].dump()));
    const nlohmann::json& shape_json = entry["shape"];
    if (!shape_json.is_array() || shape_json.size() > static_cast<size_t>(Shape::kMaxDims))
      bad(fmt::format("shape {} is not a list of at most {} dimensions", shape_json.dump(), Shape::kMaxDims));
    std::vector<int64_t> dims;
    uint64_t numel = 1;
    for (const auto& d : shape_json) {
      if (!d.is_number_unsigned()) bad(fmt::format("shape {} has a non-integer or negative dimension", shape_json.dump()));
      const uint64_t dim = d.get<uint64_t>();
      if (__builtin_mul_overflow(numel, dim, &numel))
        bad(fmt::format("shape {} has more than 2^64 elements", shape_json.dump()));
      dims.push_back(static_cast<int64_t>(dim));
    }
    const nlohmann::json& offsets = entry["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned())
      bad(fmt::format("data_offsets {} is not a pair of non-negative integers", offsets.dump()));
    const uint64_t begin = offsets[0].get<uint64_t>();
    const uint64_t end = offsets[1].get<uint64_t>();
    if (begin > end || end > data_size)
      bad(fmt::format("data_offsets [{}, {}] out of range, expected begin <= end <= {} (the data section size)", begin,
                      end, data_size));
    const uint64_t elem = dtype_size(dtype);
    uint64_t expected_bytes = 0;
    if (__builtin_mul_overflow(numel, elem, &expected_bytes))
      bad(fmt::format("shape {} of {} has more than 2^64 bytes", shape_json.dump(), dtype_name(dtype)));
    if (end - begin != expected_bytes)
      bad(fmt::format("data_offsets [{}, {}] hold {} bytes, expected {} ({} x {} of {} bytes)", begin, end,
                      end - begin, expected_bytes, shape_json.dump(), dtype_name(dtype), elem));
    if ((data_start + begin) % elem != 0)
      bad(fmt::format("data offset {} is not aligned to its {}-byte elements", begin, elem));
    if (begin < end) spans.push_back(Span{begin, end, name});  // empty tensors overlap nothing
    file.tensors_.emplace(name, Tensor(const_cast<unsigned char*>(bytes + data_start + begin), dtype, Shape::of(dims)));
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < spans.size(); ++i) {
    const Span& a = spans[i - 1];
    const Span& b = spans[i];
    if (b.begin < a.end)
      fail("{}: tensor '{}': data_offsets [{}, {}] overlap tensor '{}' [{}, {}]", path, b.name, b.begin, b.end, a.name,
           a.begin, a.end);
  }
  return file;
}

SafetensorsFile::~SafetensorsFile() { unmap(); }

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept
    : path_(std::move(other.path_)),
      mapping_(other.mapping_),
      mapping_bytes_(other.mapping_bytes_),
      tensors_(std::move(other.tensors_)),
      metadata_(std::move(other.metadata_)) {
  other.mapping_ = nullptr;
  other.mapping_bytes_ = 0;
}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    unmap();
    path_ = std::move(other.path_);
    mapping_ = other.mapping_;
    mapping_bytes_ = other.mapping_bytes_;
    tensors_ = std::move(other.tensors_);
    metadata_ = std::move(other.metadata_);
    other.mapping_ = nullptr;
    other.mapping_bytes_ = 0;
  }
  return *this;
}

void SafetensorsFile::unmap() {
  if (mapping_) ::munmap(mapping_, mapping_bytes_);
  mapping_ = nullptr;
  mapping_bytes_ = 0;
}

const Tensor& SafetensorsFile::tensor(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) fail("{}: no tensor '{}'", path_, name);
  return it->second;
}

}  // namespace moe4d
