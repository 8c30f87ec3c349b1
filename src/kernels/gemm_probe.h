// kernels/gemm_probe.h — measures this machine's GEMM speed (the denominator of "fraction of peak").
//
// Used by benchmarks and by `moe4d bench` to calibrate the planner. Results are best-of-N after a
// warm-up; the caller pins BLAS threads.
#pragma once

namespace moe4d {

// Best GFLOP/s of C[m,n] = op(A) op(B) over `repeats` runs, fp32 through moe4d::gemm.
double sgemm_gflops(int m, int n, int k, bool trans_a = false, bool trans_b = false, int repeats = 5);

// Best of square sizes 512, 1024 and 2048: the sgemm peak of this machine as the model sees it.
double sgemm_peak_gflops(int repeats = 5);

}  // namespace moe4d
