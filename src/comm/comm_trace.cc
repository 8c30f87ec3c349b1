#include "comm/comm_trace.h"

#include <algorithm>

#include "core/cycle_clock.h"

namespace moe4d {

double CommTraceEvent::waited_seconds() const {
  if (wait_ns <= 0 || end_ns <= wait_ns || last_arrival_ns <= wait_ns) return 0.0;
  return double(std::min(last_arrival_ns, end_ns) - wait_ns) * 1e-9;
}

int64_t trace_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(CycleClock::now().time_since_epoch()).count();
}

}  // namespace moe4d
