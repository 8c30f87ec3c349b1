// core/allocator.cc — the host allocator and copies between devices.
#include "core/allocator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "core/check.h"
#include "core/error.h"

namespace moe4d {

std::string Device::str() const {
  switch (type) {
    case DeviceType::kHost:
      return index == 0 ? "host" : "host:" + std::to_string(index);
  }
  return "device?";
}

namespace {

constexpr size_t kPageAlignFrom = 64 * 1024;

class HostAllocator final : public Allocator {
 public:
  Device device() const override { return kHostDevice; }

  void* allocate(size_t bytes) override {
    if (bytes == 0) return nullptr;
    const size_t alignment = bytes >= kPageAlignFrom ? 4096 : 64;
    const size_t rounded = (bytes + alignment - 1) / alignment * alignment;
    void* data = std::aligned_alloc(alignment, rounded);
    if (!data) throw std::bad_alloc();
    std::memset(data, 0, rounded);
    return data;
  }

  void deallocate(void* data, size_t) override { std::free(data); }

  void release_zeroed(void* data, size_t bytes) override {
    if (bytes == 0) return;
    const auto begin = reinterpret_cast<uintptr_t>(data);
    const uintptr_t end = begin + bytes;
    uintptr_t first, last;
    interior_pages(begin, end, &first, &last);
    if (first == last) {
      std::memset(data, 0, bytes);
      return;
    }
    std::memset(data, 0, first - begin);
    std::memset(reinterpret_cast<void*>(last), 0, end - last);
    // Private anonymous pages read as zero after MADV_DONTNEED: a release *and* a zeroing.
    advise_dontneed(first, last);
  }

  void release_discarded(void* data, size_t bytes) override {
    if (bytes == 0) return;
    const auto begin = reinterpret_cast<uintptr_t>(data);
    uintptr_t first, last;
    interior_pages(begin, begin + bytes, &first, &last);
    if (first != last) advise_dontneed(first, last);
  }

  size_t resident_bytes(const void* data, size_t bytes) const override {
    if (bytes == 0) return 0;
    const uintptr_t page = release_unit();
    const auto begin = reinterpret_cast<uintptr_t>(data) / page * page;
    const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes + page - 1) / page * page;
    std::vector<unsigned char> resident((end - begin) / page);
    const int rc = mincore(reinterpret_cast<void*>(begin), end - begin, resident.data());
    MOE4D_CHECK_MSG(rc == 0, "mincore failed on {} bytes", end - begin);
    size_t pages = 0;
    for (unsigned char r : resident) pages += r & 1u;
    return pages * page;
  }

  size_t release_unit() const override {
    static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return page;
  }

 private:
  // The whole pages inside [begin, end), as [first, last) addresses; empty when there are none.
  void interior_pages(uintptr_t begin, uintptr_t end, uintptr_t* first, uintptr_t* last) const {
    const uintptr_t page = release_unit();
    *first = (begin + page - 1) / page * page;
    *last = end / page * page;
    if (*last < *first) *last = *first;
  }

  static void advise_dontneed(uintptr_t first, uintptr_t last) {
    const int rc = madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
    MOE4D_CHECK_MSG(rc == 0, "madvise(MADV_DONTNEED) failed on {} bytes", last - first);
  }
};

}  // namespace

Allocator& host_allocator() {
  static HostAllocator allocator;
  return allocator;
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (!dst_device.is_host() || !src_device.is_host())
    throw Error(fmt::format("no copy from {} to {} memory", src_device.str(), dst_device.str()));
  if (bytes > 0 && dst != src) std::memmove(dst, src, bytes);
}

}  // namespace moe4d
