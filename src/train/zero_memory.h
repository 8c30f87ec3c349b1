// train/zero_memory.h — giving the memory of unused ranges of the flat parameter / gradient buffers
// back to the operating system, and measuring what is resident.
//
// The ParamStore keeps one flat address range per parameter group so that every block finds its
// parameters at params.value(id) / params.grad(id) in every ZeRO stage. Which parts of that range
// hold physical memory is ZeRO's decision (docs/zero.md): ZeRO-2/3 keep a gradient range only
// from the moment the blocks write it to its bucket's reduce-scatter, ZeRO-3 keeps a layer's values only
// while the layer runs. "Releasing" a range returns its whole pages to the kernel
// (madvise(MADV_DONTNEED) on private anonymous memory): they hold no memory until written again and
// then read as zero. Pages shared with a neighbouring range stay resident.
//
// Linux-specific; thread-safe (no state).
#pragma once

#include <cstddef>

namespace moe4d {

// Makes floats [data, data + count) read as zero and returns the pages wholly inside the range.
void release_zeroed(float* data, size_t count);

// Returns the pages wholly inside [data, data + count); what the range then reads is unspecified
// (for values that will be overwritten before their next use).
void release_discarded(float* data, size_t count);

// Bytes of [data, data + bytes) backed by physical memory now, in whole pages (mincore).
size_t resident_bytes(const void* data, size_t bytes);

// The system page size in bytes.
size_t page_bytes();

}  // namespace moe4d
