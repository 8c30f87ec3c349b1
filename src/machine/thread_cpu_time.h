// machine/thread_cpu_time.h — CPU seconds consumed by the calling thread.
//
// The machine surveys time single-threaded kernels (GEMM, streaming loops) with it: on a quiet
// machine a single-threaded kernel's CPU time is its wall time, and on a machine shared with other
// work it leaves out the time slices other processes held the core — what a quiet machine, which
// the planner describes, would not lose. (Cache and memory-bus contention still count: they slow
// the thread while it runs.) Thread-safe.
#pragma once

#include <time.h>

namespace moe4d {

inline double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

}  // namespace moe4d
