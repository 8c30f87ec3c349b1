// train/zero_memory.cc — madvise / mincore behind ZeRO's memory release (see the header).
#include "train/zero_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/check.h"

namespace moe4d {
namespace {

// The whole pages inside [begin, end), as [first, last) addresses; empty when there are none.
void interior_pages(uintptr_t begin, uintptr_t end, uintptr_t* first, uintptr_t* last) {
  const uintptr_t page = page_bytes();
  *first = (begin + page - 1) / page * page;
  *last = end / page * page;
  if (*last < *first) *last = *first;
}

}  // namespace

size_t page_bytes() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

void release_zeroed(float* data, size_t count) {
  if (count == 0) return;
  const auto begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t end = begin + count * sizeof(float);
  uintptr_t first, last;
  interior_pages(begin, end, &first, &last);
  if (first == last) {
    std::memset(data, 0, count * sizeof(float));
    return;
  }
  std::memset(data, 0, first - begin);
  std::memset(reinterpret_cast<void*>(last), 0, end - last);
  // Private anonymous pages read as zero after MADV_DONTNEED, which is what makes this a release
  // *and* a zeroing.
  const int rc = madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
  MOE4D_CHECK_MSG(rc == 0, "madvise(MADV_DONTNEED) failed on {} bytes", last - first);
}

void release_discarded(float* data, size_t count) {
  if (count == 0) return;
  const auto begin = reinterpret_cast<uintptr_t>(data);
  uintptr_t first, last;
  interior_pages(begin, begin + count * sizeof(float), &first, &last);
  if (first == last) return;
  const int rc = madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
  MOE4D_CHECK_MSG(rc == 0, "madvise(MADV_DONTNEED) failed on {} bytes", last - first);
}

size_t resident_bytes(const void* data, size_t bytes) {
  if (bytes == 0) return 0;
  const uintptr_t page = page_bytes();
  const auto begin = reinterpret_cast<uintptr_t>(data) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes + page - 1) / page * page;
  std::vector<unsigned char> resident((end - begin) / page);
  const int rc = mincore(reinterpret_cast<void*>(begin), end - begin, resident.data());
  MOE4D_CHECK_MSG(rc == 0, "mincore failed on {} bytes", end - begin);
  size_t pages = 0;
  for (unsigned char r : resident) pages += r & 1u;
  return pages * page;
}

}  // namespace moe4d
