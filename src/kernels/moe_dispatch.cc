// kernels/moe_dispatch.cc — route plan (capacity dropping, grouping by expert) and the local
// permute / unpermute of token rows.
#include "kernels/moe_dispatch.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/check.h"
#include "kernels/vec_math.h"

namespace moe4d {

// 1. Counting sort of the slots by expert into `scratch`, stable in slot order. The per-expert
//    cursors live in expert_offsets itself: after the counts are prefix-summed, offsets[e + 1] is the
//    end of expert e; filling backwards from the last slot decrements it down to the start of e.
// 2. Per expert over capacity: nth_element by (weight descending, slot ascending) splits kept from
//    dropped, then the kept part is re-sorted by slot. Rows are then written compactly.
// Cost: O(T*k + E) plus O(n log n) for the n slots of each overflowing expert; no allocation.
int moe_route_plan(int* expert_offsets, int* row_slot, int* slot_row, int* scratch, const int* topk_idx,
                   const float* topk_w, int tokens, int experts, int k, int capacity) {
  MOE4D_CHECK(tokens >= 0 && experts > 0 && k > 0);
  const int slots = tokens * k;
  int* off = expert_offsets;
  std::fill(off, off + experts + 1, 0);
  for (int s = 0; s < slots; ++s) {
    MOE4D_CHECK_MSG(topk_idx[s] >= 0 && topk_idx[s] < experts, "slot {} routed to expert {} of {}", s, topk_idx[s],
                    experts);
    ++off[topk_idx[s] + 1];
  }
  for (int e = 0; e < experts; ++e) off[e + 1] += off[e];
  for (int s = slots - 1; s >= 0; --s) scratch[--off[topk_idx[s] + 1]] = s;
  // Now off[e + 1] = start of expert e in scratch, off[0] = 0 = start of expert 0.

  // Kept slots, by (weight descending, slot ascending). A NaN weight ranks lowest so that the order
  // stays a strict weak ordering (std::nth_element requires one).
  auto keep_first = [topk_w](int a, int b) {
    const float wa = topk_w[a] != topk_w[a] ? -INFINITY : topk_w[a];
    const float wb = topk_w[b] != topk_w[b] ? -INFINITY : topk_w[b];
    return wa > wb || (wa == wb && a < b);
  };
  int kept = 0;
  for (int e = 0; e < experts; ++e) {
    const int begin = off[e + 1];
    const int end = e + 1 < experts ? off[e + 2] : slots;
    int* seg = scratch + begin;
    int n = end - begin;
    if (capacity >= 0 && n > capacity) {
      std::nth_element(seg, seg + capacity, seg + n, keep_first);
      for (int i = capacity; i < n; ++i) slot_row[seg[i]] = -1;
      std::sort(seg, seg + capacity);
      n = capacity;
    }
    off[e] = kept;  // off[e] is no longer needed as a start (expert e - 1 is done)
    for (int i = 0; i < n; ++i) {
      row_slot[kept] = seg[i];
      slot_row[seg[i]] = kept;
      ++kept;
    }
  }
  off[experts] = kept;
  return kept;
}

void moe_permute_forward(float* xp, const float* x, const int* row_slot, int rows, int k, int d) {
  for (int r = 0; r < rows; ++r)
    std::memcpy(xp + static_cast<int64_t>(r) * d, x + static_cast<int64_t>(row_slot[r] / k) * d, sizeof(float) * d);
}

void moe_permute_backward(float* dx, const float* dxp, const int* row_slot, int rows, int k, int d) {
  for (int r = 0; r < rows; ++r) {
    float* dst = dx + static_cast<int64_t>(row_slot[r] / k) * d;
    const float* src = dxp + static_cast<int64_t>(r) * d;
    for (int j = 0; j < d; ++j) dst[j] += src[j];
  }
}

void moe_unpermute_forward(float* out, const float* y, const int* slot_row, const float* topk_w, int tokens, int k,
                           int d) {
  for (int t = 0; t < tokens; ++t) {
    float* o = out + static_cast<int64_t>(t) * d;
    std::fill(o, o + d, 0.0f);
    for (int j = 0; j < k; ++j) {
      const int s = t * k + j;
      if (slot_row[s] < 0) continue;
      const float w = topk_w[s];
      const float* yr = y + static_cast<int64_t>(slot_row[s]) * d;
      for (int c = 0; c < d; ++c) o[c] += w * yr[c];
    }
  }
}

void moe_unpermute_backward(float* dy, float* dtopk_w, const float* dout, const float* y, const int* slot_row,
                            const float* topk_w, int tokens, int k, int d) {
  for (int t = 0; t < tokens; ++t) {
    const float* g = dout + static_cast<int64_t>(t) * d;
    for (int j = 0; j < k; ++j) {
      const int s = t * k + j;
      if (slot_row[s] < 0) {
        dtopk_w[s] = 0.0f;
        continue;
      }
      const int64_t row = static_cast<int64_t>(slot_row[s]) * d;
      dtopk_w[s] = vec::dot(g, y + row, d);
      const float w = topk_w[s];
      for (int c = 0; c < d; ++c) dy[row + c] = w * g[c];
    }
  }
}

}  // namespace moe4d
