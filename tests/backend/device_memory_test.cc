// Devices and memory: every buffer, arena and tensor knows its device, memory comes from an
// allocator, and copies name both ends (core/allocator.h).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/allocator.h"
#include "core/arena.h"
#include "core/error.h"
#include "core/tensor.h"

namespace moe4d {
namespace {

// Counts what goes through it, on top of the host allocator.
class CountingAllocator final : public Allocator {
 public:
  Device device() const override { return host_allocator().device(); }
  void* allocate(size_t bytes) override {
    ++allocations;
    live += bytes;
    return host_allocator().allocate(bytes);
  }
  void deallocate(void* data, size_t bytes) override {
    live -= bytes;
    host_allocator().deallocate(data, bytes);
  }
  void release_zeroed(void* d, size_t b) override { host_allocator().release_zeroed(d, b); }
  void release_discarded(void* d, size_t b) override { host_allocator().release_discarded(d, b); }
  size_t resident_bytes(const void* d, size_t b) const override { return host_allocator().resident_bytes(d, b); }
  size_t release_unit() const override { return host_allocator().release_unit(); }
  int allocations = 0;
  size_t live = 0;
};

TEST(DeviceMemory, HostIsTheDefaultEverywhere) {
  EXPECT_TRUE(kHostDevice.is_host());
  EXPECT_EQ(kHostDevice.str(), "host");
  Buffer b(100);
  EXPECT_EQ(b.device(), kHostDevice);
  EXPECT_EQ(&b.allocator(), &host_allocator());
  Arena arena;
  EXPECT_EQ(arena.device(), kHostDevice);
  Tensor t = Tensor::f32(b.f32(), {5, 5});
  EXPECT_EQ(t.device, kHostDevice);
  EXPECT_EQ(t.slice(0, 1, 2).device, kHostDevice);
}

TEST(DeviceMemory, BufferAndArenaAllocateThroughTheirAllocator) {
  CountingAllocator counting;
  {
    Buffer b(1000, counting);
    EXPECT_EQ(counting.allocations, 1);
    EXPECT_EQ(counting.live, 1000u);
    for (size_t i = 0; i < 250; ++i) EXPECT_EQ(b.f32()[i], 0.0f);  // zero-filled
    Buffer moved = std::move(b);
    EXPECT_EQ(&moved.allocator(), &counting);
    Arena arena(0, counting);
    arena.alloc_f32(1 << 20);  // a chunk
    arena.alloc_f32(1 << 20);  // another one
    EXPECT_EQ(counting.allocations, 3);
    arena.reset();  // merged into one chunk: one more allocation, two returned
    EXPECT_EQ(counting.allocations, 4);
  }
  EXPECT_EQ(counting.live, 0u);
}

TEST(DeviceMemory, CopiesNameBothDevices) {
  std::vector<float> a = {1, 2, 3, 4, 5, 6}, b(6);
  copy_bytes(b.data(), kHostDevice, a.data(), kHostDevice, a.size() * sizeof(float));
  EXPECT_EQ(a, b);
  std::vector<float> c(6);
  copy_tensor(Tensor::f32(c.data(), {2, 3}), Tensor::f32(a.data(), {2, 3}));
  EXPECT_EQ(a, c);
}

TEST(DeviceMemory, HostAllocatorReleasesWholePages) {
  const size_t page = host_allocator().release_unit();
  const size_t bytes = 16 * page;
  Buffer b(bytes);
  std::memset(b.data(), 1, bytes);
  EXPECT_EQ(host_allocator().resident_bytes(b.data(), bytes), bytes);
  host_allocator().release_zeroed(static_cast<char*>(b.data()) + 100, 8 * page);
  EXPECT_LE(host_allocator().resident_bytes(b.data(), bytes), bytes - 7 * page);
  const auto* bytes_of = static_cast<const unsigned char*>(b.data());
  EXPECT_EQ(bytes_of[99], 1);
  for (size_t i = 100; i < 100 + 8 * page; i += 97) ASSERT_EQ(bytes_of[i], 0) << i;
  EXPECT_EQ(bytes_of[100 + 8 * page], 1);
}

}  // namespace
}  // namespace moe4d
