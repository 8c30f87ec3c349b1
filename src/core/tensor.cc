#include "core/tensor.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include <fmt/format.h>

namespace moe4d {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kBF16: return 2;
    case DType::kF16: return 2;
    case DType::kF64: return 8;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
    case DType::kU8: return 1;
    case DType::kU16: return 2;
    case DType::kU32: return 4;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "F32";
    case DType::kBF16: return "BF16";
    case DType::kF16: return "F16";
    case DType::kF64: return "F64";
    case DType::kI32: return "I32";
    case DType::kI64: return "I64";
    case DType::kU8: return "U8";
    case DType::kU16: return "U16";
    case DType::kU32: return "U32";
  }
  return "?";
}

Shape::Shape(std::initializer_list<int64_t> dims) {
  MOE4D_CHECK_LE(static_cast<int>(dims.size()), kMaxDims);
  for (int64_t d : dims) dims_[ndim_++] = d;
}

Shape Shape::of(const std::vector<int64_t>& dims) {
  MOE4D_CHECK_LE(static_cast<int>(dims.size()), kMaxDims);
  Shape s;
  for (int64_t d : dims) s.dims_[s.ndim_++] = d;
  return s;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim_; ++i) n *= dims_[i];
  return n;
}

bool Shape::operator==(const Shape& other) const {
  if (ndim_ != other.ndim_) return false;
  for (int i = 0; i < ndim_; ++i)
    if (dims_[i] != other.dims_[i]) return false;
  return true;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < ndim_; ++i) s += fmt::format("{}{}", i ? ", " : "", dims_[i]);
  return s + "]";
}

// Large buffers start on a 4 KiB page (the allocator's contract): ZeRO releases the pages of ranges of
// the flat parameter / gradient buffers, and bucket boundaries at page multiples then share no page
// with their neighbours.
Buffer::Buffer(size_t bytes, Allocator& allocator) : bytes_(bytes), allocator_(&allocator) {
  if (bytes > 0) data_ = allocator.allocate(bytes);
}

Buffer::~Buffer() {
  if (data_) allocator_->deallocate(data_, bytes_);
}

Buffer::Buffer(Buffer&& other) noexcept : data_(other.data_), bytes_(other.bytes_), allocator_(other.allocator_) {
  other.data_ = nullptr;
  other.bytes_ = 0;
}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    if (data_) allocator_->deallocate(data_, bytes_);
    data_ = other.data_;
    bytes_ = other.bytes_;
    allocator_ = other.allocator_;
    other.data_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

Tensor::Tensor(void* data_in, DType dtype_in, Shape shape_in, Device device_in)
    : data(data_in), dtype(dtype_in), shape(shape_in), device(device_in) {
  int64_t stride = 1;
  for (int i = shape.ndim() - 1; i >= 0; --i) {
    strides[i] = stride;
    stride *= shape[i];
  }
}

bool Tensor::is_contiguous() const {
  int64_t stride = 1;
  for (int i = shape.ndim() - 1; i >= 0; --i) {
    if (shape[i] != 1 && strides[i] != stride) return false;
    stride *= shape[i];
  }
  return true;
}

Tensor Tensor::slice(int dim, int64_t start, int64_t length) const {
  MOE4D_CHECK(dim >= 0 && dim < shape.ndim());
  MOE4D_CHECK_MSG(start >= 0 && length >= 0 && start + length <= shape[dim], "slice [{}, {}) of dim {} of {}",
                  start, start + length, dim, shape.str());
  Tensor view = *this;
  view.data = static_cast<char*>(data) + start * strides[dim] * static_cast<int64_t>(dtype_size(dtype));
  view.shape[dim] = length;
  return view;
}

namespace {
// Visits every element of a strided fp32 view in row-major order.
template <typename Fn>
void for_each_offset(const Tensor& t, Fn&& fn) {
  const int nd = t.shape.ndim();
  std::array<int64_t, Shape::kMaxDims> idx{};
  const int64_t n = t.numel();
  for (int64_t linear = 0; linear < n; ++linear) {
    int64_t offset = 0;
    for (int i = 0; i < nd; ++i) offset += idx[i] * t.strides[i];
    fn(linear, offset);
    for (int i = nd - 1; i >= 0; --i) {
      if (++idx[i] < t.shape[i]) break;
      idx[i] = 0;
    }
  }
}
}  // namespace

void copy_tensor(const Tensor& dst, const Tensor& src) {
  MOE4D_CHECK_MSG(dst.dtype == src.dtype && dst.shape == src.shape, "copy_tensor of {} {} into {} {}",
                  dtype_name(src.dtype), src.shape.str(), dtype_name(dst.dtype), dst.shape.str());
  MOE4D_CHECK_MSG(dst.is_contiguous() && src.is_contiguous(), "copy_tensor needs contiguous tensors");
  copy_bytes(dst.data, dst.device, src.data, src.device, src.nbytes());
}

void copy_to_contiguous(const Tensor& src, float* dst) {
  MOE4D_CHECK(src.device.is_host());
  if (src.numel() == 0) return;
  const float* base = src.f32();
  if (src.is_contiguous()) {
    std::memcpy(dst, base, src.nbytes());
    return;
  }
  for_each_offset(src, [&](int64_t linear, int64_t offset) { dst[linear] = base[offset]; });
}

void copy_from_contiguous(const float* src, const Tensor& dst) {
  MOE4D_CHECK(dst.device.is_host());
  if (dst.numel() == 0) return;
  float* base = dst.f32();
  if (dst.is_contiguous()) {
    std::memcpy(base, src, dst.nbytes());
    return;
  }
  for_each_offset(dst, [&](int64_t linear, int64_t offset) { base[offset] = src[linear]; });
}

}  // namespace moe4d
