// checkpoint/safetensors.h — the safetensors file format: a streaming writer and a mmap reader.
//
// Layout (https://huggingface.co/docs/safetensors): 8-byte little-endian header length N, N bytes
// of JSON `{"<name>": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
// "__metadata__": {string: string}}`, then the data section; offsets are relative to its start.
// The writer pads the header with spaces to a multiple of 8 and lays tensors out by decreasing
// element size, so every tensor starts aligned to its dtype when the file is memory-mapped (the
// same layout as the Hugging Face writer; files interoperate both ways).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/output_file.h"
#include "core/tensor.h"

namespace moe4d {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using SafetensorsMetadata = std::map<std::string, std::string>;

// Streams `tensors` (any dtype; views may be strided) into `out`: no copy of the data is made
// beyond a small staging block for strided views. Throws moe4d::Error for a repeated or empty name
// or the reserved name "__metadata__". Does not finish() `out`.
void write_safetensors(OutputFile& out, const NamedTensors& tensors, const SafetensorsMetadata& metadata);

// Writes a safetensors header: the 8-byte little-endian length, then `header_json` padded with spaces
// to a multiple of 8 bytes. The tensor data follows it, in the order of its data_offsets.
void write_safetensors_header(OutputFile& out, std::string header_json);

// Writes a standalone safetensors file at `path` (created or truncated, fsync'ed).
void save_safetensors(const std::string& path, const NamedTensors& tensors, const SafetensorsMetadata& metadata);

// A safetensors file memory-mapped read-only. Opening validates the whole header (length within
// the file, JSON, known dtypes, at most Shape::kMaxDims dimensions, offsets in range, ordered,
// non-overlapping, aligned to the dtype, and sized numel * dtype size); every failure is one
// moe4d::Error line naming the file and, where there is one, the tensor.
//
// The Tensor views point into the read-only mapping: they must not be written through, and they
// live as long as this object. Move-only; const methods are safe to call from several threads.
class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  bool contains(const std::string& name) const { return tensors_.count(name) > 0; }
  // Throws moe4d::Error naming the file and `name` if there is no such tensor.
  const Tensor& tensor(const std::string& name) const;
  const std::map<std::string, Tensor>& tensors() const { return tensors_; }
  const SafetensorsMetadata& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  void unmap();

  std::string path_;
  void* mapping_ = nullptr;
  size_t mapping_bytes_ = 0;
  std::map<std::string, Tensor> tensors_;
  SafetensorsMetadata metadata_;
};

}  // namespace moe4d
