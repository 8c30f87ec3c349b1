// core/allocator.h — devices, the allocators that hand out their memory, and copies between them.
//
// Every Buffer, Arena and Tensor carries the Device its memory lives on (PyTorch's c10::Device):
// today that is always the host, and a future accelerator backend adds a DeviceType and an
// Allocator for it (ggml's backend buffer type is the same idea). Memory moves between devices
// only through copy_bytes, which names both ends, so a host pointer is never handed to a device
// kernel by accident.
//
// Besides allocation, an Allocator owns the "release / reuse" of memory inside a live allocation:
// ZeRO keeps one flat range per parameter group but holds physical memory only for the parts it
// currently needs (docs/zero.md). The host allocator does that with madvise/mincore on whole pages;
// a device allocator would unmap or return blocks of its pool.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace moe4d {

enum class DeviceType : uint8_t { kHost };

struct Device {
  DeviceType type = DeviceType::kHost;
  int index = 0;  // which device of its type (always 0 for the host)

  bool is_host() const { return type == DeviceType::kHost; }
  bool operator==(const Device&) const = default;
  std::string str() const;  // "host", "cuda:1", ...
};

inline constexpr Device kHostDevice{};

// An ordered stream of operations on a device (a CUDA or Ascend stream); 0 is the default queue.
// Compute backends (backend/backend.h) enqueue kernels on one and communicators their collectives,
// so that a collective starts after the kernels that wrote its input. On the host both run each
// operation at its call and a queue orders nothing.
struct Queue {
  int id = 0;
  bool operator==(const Queue&) const = default;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual Device device() const = 0;

  // `bytes` zero-filled bytes, 64-byte aligned (page aligned from 64 KiB on, so that ranges at page
  // multiples of a large allocation share no page with their neighbours). Throws std::bad_alloc.
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* data, size_t bytes) = 0;

  // Inside a live allocation: [data, data + bytes) reads as zero afterwards and the allocator's
  // whole units (pages) in it hold no memory until written again.
  virtual void release_zeroed(void* data, size_t bytes) = 0;
  // As release_zeroed, but what the range reads afterwards is unspecified (values that are
  // overwritten before their next use); only whole units are touched.
  virtual void release_discarded(void* data, size_t bytes) = 0;
  // Bytes of [data, data + bytes) backed by memory now, in whole units.
  virtual size_t resident_bytes(const void* data, size_t bytes) const = 0;
  // The unit of release_* and resident_bytes (the page size on the host).
  virtual size_t release_unit() const = 0;
};

// The process-wide host allocator (aligned_alloc, madvise(MADV_DONTNEED), mincore). Thread-safe.
Allocator& host_allocator();

// Copies `bytes` bytes from src on src_device to dst on dst_device. Host to host today; a pair of
// devices no backend can copy between is a moe4d::Error naming both.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);

}  // namespace moe4d
