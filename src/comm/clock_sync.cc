#include "comm/clock_sync.h"

#include <limits>
#include <vector>

#include "comm/comm_trace.h"

namespace moe4d {

ClockOffset estimate_clock_offset(Communicator& world, int rounds) {
  constexpr int kTag = 0x7c10;
  ClockOffset mine;
  std::vector<int64_t> results(2 * size_t(world.size()), 0);  // per rank: offset, round trip
  if (world.rank() == 0) {
    for (int r = 1; r < world.size(); ++r) {
      int64_t best_rtt = std::numeric_limits<int64_t>::max(), best_offset = 0;
      for (int i = 0; i < rounds; ++i) {
        int64_t ping = 0, remote = 0;
        const int64_t t0 = trace_clock_ns();
        world.send(&ping, 1, DType::kI64, r, kTag);
        world.recv(&remote, 1, DType::kI64, r, kTag);
        const int64_t t1 = trace_clock_ns();
        if (t1 - t0 < best_rtt) {
          best_rtt = t1 - t0;
          best_offset = remote - (t0 + (t1 - t0) / 2);
        }
      }
      results[2 * r] = best_offset;
      results[2 * r + 1] = best_rtt;
    }
  } else {
    for (int i = 0; i < rounds; ++i) {
      int64_t ping = 0;
      world.recv(&ping, 1, DType::kI64, 0, kTag);
      const int64_t now = trace_clock_ns();
      world.send(&now, 1, DType::kI64, 0, kTag);
    }
  }
  world.broadcast(results.data(), results.size(), DType::kI64, 0);
  mine.offset_ns = results[2 * world.rank()];
  mine.round_trip_ns = results[2 * world.rank() + 1];
  return mine;
}

}  // namespace moe4d
