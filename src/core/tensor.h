// core/tensor.h — shapes, owning aligned buffers and non-owning tensor views.
//
// moe4d keeps tensors deliberately simple (llm.c style): kernels take raw pointers plus explicit
// sizes, and `Tensor` is the shape-carrying view used where shapes travel (parameters, checkpoints,
// tests). A Tensor never owns memory; `Buffer` does. Views may be strided (e.g. a column block of a
// row-major matrix), but kernels expect contiguous rows unless their header says otherwise.
// Buffers and tensors carry the Device their memory is on (core/allocator.h; the host today).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/check.h"

namespace moe4d {

enum class DType : uint8_t { kF32, kBF16, kF16, kF64, kI32, kI64, kU8, kU16, kU32 };

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);  // safetensors spelling: "F32", "BF16", ...

// Up to kMaxDims dimensions, row-major.
class Shape {
 public:
  static constexpr int kMaxDims = 4;
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  static Shape of(const std::vector<int64_t>& dims);
  std::vector<int64_t> dims() const { return {dims_.begin(), dims_.begin() + ndim_}; }

  int ndim() const { return ndim_; }
  int64_t operator[](int i) const { MOE4D_CHECK(i >= 0 && i < ndim_); return dims_[i]; }
  int64_t& operator[](int i) { MOE4D_CHECK(i >= 0 && i < ndim_); return dims_[i]; }
  int64_t numel() const;
  bool operator==(const Shape& other) const;
  std::string str() const;  // "[4, 256]"

 private:
  std::array<int64_t, kMaxDims> dims_{};
  int ndim_ = 0;
};

// Owning, 64-byte aligned, zero-initialised memory of one allocator (the host's by default).
// Move-only.
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes, Allocator& allocator = host_allocator());
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  float* f32() { return static_cast<float*>(data_); }
  const float* f32() const { return static_cast<const float*>(data_); }
  size_t bytes() const { return bytes_; }
  Device device() const { return allocator_->device(); }
  Allocator& allocator() const { return *allocator_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Allocator* allocator_ = &host_allocator();
};

// Non-owning view: data pointer, dtype, shape, element strides and the device of the memory.
struct Tensor {
  void* data = nullptr;
  DType dtype = DType::kF32;
  Shape shape;
  std::array<int64_t, Shape::kMaxDims> strides{};
  Device device;

  Tensor() = default;
  Tensor(void* data, DType dtype, Shape shape, Device device = kHostDevice);  // contiguous strides
  static Tensor f32(float* data, Shape shape, Device device = kHostDevice) {
    return Tensor(data, DType::kF32, shape, device);
  }

  int64_t numel() const { return shape.numel(); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  bool is_contiguous() const;
  float* f32() const { MOE4D_CHECK(dtype == DType::kF32); return static_cast<float*>(data); }
  // The view of elements [start, start+length) along `dim` (shares memory; may be strided).
  Tensor slice(int dim, int64_t start, int64_t length) const;
};

// Copies src into dst (same dtype and shape, both contiguous), across devices (copy_bytes).
void copy_tensor(const Tensor& dst, const Tensor& src);

// Copies a (possibly strided) fp32 host view into a contiguous destination of the same shape, or back.
void copy_to_contiguous(const Tensor& src, float* dst);
void copy_from_contiguous(const float* src, const Tensor& dst);

}  // namespace moe4d
