#include "core/arena.h"

#include <algorithm>

namespace moe4d {
namespace {
constexpr size_t kAlign = 64;
constexpr size_t kMinChunk = size_t{1} << 20;
size_t round_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
}  // namespace

Arena::Arena(size_t initial_bytes, Allocator& allocator) : allocator_(&allocator) {
  if (initial_bytes > 0) chunks_.push_back(Chunk{Buffer(round_up(initial_bytes), allocator), 0});
}

void* Arena::alloc_bytes(size_t bytes) {
  bytes = round_up(std::max<size_t>(bytes, 1));
  if (chunks_.empty() || chunks_.back().offset + bytes > chunks_.back().memory.bytes()) {
    size_t grow = std::max({bytes, kMinChunk, capacity_bytes() / 2});
    chunks_.push_back(Chunk{Buffer(grow, *allocator_), 0});
  }
  Chunk& chunk = chunks_.back();
  void* out = static_cast<char*>(chunk.memory.data()) + chunk.offset;
  chunk.offset += bytes;
  used_ += bytes;
  peak_ = std::max(peak_, used_);
  return out;
}

void Arena::reset() {
  if (chunks_.size() > 1) {
    size_t total = capacity_bytes();
    chunks_.clear();
    chunks_.push_back(Chunk{Buffer(total, *allocator_), 0});
  }
  for (Chunk& c : chunks_) c.offset = 0;
  used_ = 0;
}

size_t Arena::capacity_bytes() const {
  size_t total = 0;
  for (const Chunk& c : chunks_) total += c.memory.bytes();
  return total;
}

}  // namespace moe4d
