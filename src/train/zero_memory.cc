// train/zero_memory.cc — ZeRO's memory release through the host allocator (core/allocator.h).
#include "train/zero_memory.h"

#include "core/allocator.h"

namespace moe4d {

size_t page_bytes() { return host_allocator().release_unit(); }

void release_zeroed(float* data, size_t count) { host_allocator().release_zeroed(data, count * sizeof(float)); }

void release_discarded(float* data, size_t count) {
  host_allocator().release_discarded(data, count * sizeof(float));
}

size_t resident_bytes(const void* data, size_t bytes) { return host_allocator().resident_bytes(data, bytes); }

}  // namespace moe4d
