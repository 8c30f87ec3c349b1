// core/arena.h — bump allocator for activations and scratch, reused step after step.
//
// A training step must not allocate on its hot path. Each Arena hands out 64-byte aligned slices
// from large chunks; reset() makes all of them free again without returning memory to the OS.
// If a pass needed more than one chunk, reset() merges them into one chunk of the combined size,
// so from the second step on a step of the same shape allocates nothing. The arena also records
// its high-water mark, which is how moe4d measures activation memory.
//
// The chunks come from an Allocator (core/allocator.h; the host's by default), so an arena hands out
// memory of that allocator's device.
//
// Not thread-safe; one arena per owner (e.g. per in-flight micro-batch).
#pragma once

#include <cstddef>
#include <vector>

#include "core/tensor.h"

namespace moe4d {

class Arena {
 public:
  explicit Arena(size_t initial_bytes = 0, Allocator& allocator = host_allocator());
  Arena(Arena&&) = default;
  Arena& operator=(Arena&&) = default;

  // Zero-filled is NOT guaranteed: callers initialise what they read.
  void* alloc_bytes(size_t bytes);
  float* alloc_f32(size_t count) { return static_cast<float*>(alloc_bytes(count * sizeof(float))); }
  int* alloc_i32(size_t count) { return static_cast<int*>(alloc_bytes(count * sizeof(int))); }
  template <typename T>
  T* alloc(size_t count) { return static_cast<T*>(alloc_bytes(count * sizeof(T))); }

  void reset();
  size_t used_bytes() const { return used_; }        // bytes handed out since the last reset
  size_t peak_bytes() const { return peak_; }        // high-water mark of used_bytes() ever
  size_t capacity_bytes() const;                     // bytes held from the OS
  void reset_peak() { peak_ = used_; }
  Device device() const { return allocator_->device(); }

 private:
  struct Chunk {
    Buffer memory;
    size_t offset = 0;
  };
  Allocator* allocator_;
  std::vector<Chunk> chunks_;
  size_t used_ = 0;
  size_t peak_ = 0;
};

}  // namespace moe4d
