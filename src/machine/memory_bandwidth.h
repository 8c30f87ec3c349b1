// machine/memory_bandwidth.h — how fast one core streams memory (STREAM-style copy and triad).
//
// The planner times element-wise work (norms, softmax, SwiGLU, residual adds) and the optimizer step
// at ClusterSpec::device.memory_bandwidth. measure_memory_bandwidth streams three arrays of
// `array_bytes` each — copy a[i] = b[i] and triad a[i] = b[i] + s * c[i], counting every byte read
// and written — and keeps the best of `repeats` passes after a warm-up pass, timed in the thread's
// CPU time (machine/thread_cpu_time.h: other processes' time slices on a shared machine left out). The array size decides what is measured: arrays beyond
// the last-level cache measure DRAM; moe4d bench uses 32 MiB arrays, the size of a layer's
// activation tensors (e.g. 2048 tokens x 4096 hidden in fp32), which is what element-wise kernels
// stream. Single-threaded; when several ranks share a machine the caller runs it on all of them at
// once, which is what training does.
#pragma once

#include <cstddef>

namespace moe4d {

struct MemoryBandwidth {
  double copy = 0;   // bytes/s
  double triad = 0;  // bytes/s
  size_t array_bytes = 0;
};

MemoryBandwidth measure_memory_bandwidth(size_t array_bytes, int repeats);

}  // namespace moe4d
