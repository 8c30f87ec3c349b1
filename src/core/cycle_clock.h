// core/cycle_clock.h — steady_clock time points read from the CPU's time-stamp counter.
//
// std::chrono::steady_clock::now() costs ~30 ns on a VM (clock_gettime through the vDSO); the
// communicator stamps every collective twice for its busy/exposed statistics, which is a tenth of a
// 1 KiB all-gather between two processes. On x86-64 with an invariant TSC (constant rate, counting
// through sleep states) CycleClock reads the counter (~10 ns) and converts it with a rate measured
// once against steady_clock (20 ms, at first use); elsewhere it is steady_clock. Its time points are
// steady_clock's, so the two mix: they differ by the calibration error, a few microseconds per
// second of run time at most.
#pragma once

#include <chrono>
#include <cstdint>

#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

namespace moe4d {

class CycleClock {
 public:
  using base = std::chrono::steady_clock;
  using duration = base::duration;
  using rep = base::rep;
  using period = base::period;
  using time_point = base::time_point;
  static constexpr bool is_steady = true;

  static time_point now() noexcept {
#if defined(__x86_64__)
    static const Calibration c = calibrate();
    if (c.invariant) return c.origin + duration(static_cast<rep>(double(__rdtsc() - c.tsc_origin) * c.ticks_to_duration));
#endif
    return base::now();
  }

 private:
#if defined(__x86_64__)
  struct Calibration {
    bool invariant = false;
    time_point origin;
    uint64_t tsc_origin = 0;
    double ticks_to_duration = 0;
  };
  static Calibration calibrate() noexcept {
    Calibration c;
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    // CPUID 0x80000007: EDX bit 8 = invariant TSC.
    if (!__get_cpuid(0x80000007, &eax, &ebx, &ecx, &edx) || !(edx & (1u << 8))) return c;
    c.origin = base::now();
    c.tsc_origin = __rdtsc();
    time_point t;
    do t = base::now();
    while (t - c.origin < std::chrono::milliseconds(20));
    const uint64_t tsc = __rdtsc();
    if (tsc <= c.tsc_origin) return c;
    c.ticks_to_duration = double((t - c.origin).count()) / double(tsc - c.tsc_origin);
    c.invariant = true;
    return c;
  }
#endif
};

}  // namespace moe4d
