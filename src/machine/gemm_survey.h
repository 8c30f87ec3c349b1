// machine/gemm_survey.h — this core's GEMM speed by problem size and precision: the planner's
// efficiency curve (ClusterSpec::gemm_efficiency) and peak FLOP/s, measured.
//
// The shapes are the GEMMs of moe4d's reference transformer over a range of model sizes (tokens T,
// hidden d, ffn f = 8d/3, head V): qkv [T,d]x[d,3d], W_o [T,d]x[d,d], W1/W3 [T,d]x[d,f], W2 [T,f]x[f,d],
// the LM head [T,d]x[d,V], and attention's per-head QK^T [S,hd]x[hd,S] and PV [S,S]x[S,hd]. Each fp32
// shape is timed as the forward (A B), the input gradient (A B^T) and the weight gradient (A^T B) —
// the three GEMMs training runs per matmul — and its efficiency is its FLOPs over the mean of the
// three times, divided by the peak (the best single GEMM seen in the survey, so efficiencies are in
// (0, 1]). The curve bins shapes by size = cbrt(M N K) (bins a factor sqrt(2) wide) and gives each bin
// the FLOP-weighted efficiency of its shapes, i.e. what the planner's per-size lookup should return
// for a typical mix of those GEMMs. Times are the best of `repeats` runs after a warm-up, in the
// thread's CPU time (machine/thread_cpu_time.h): on a quiet machine that is the wall time, and on a
// shared one it leaves out other processes' time slices, so the curve describes the quiet machine
// the planner predicts for even when measured on a busy one.
//
// fp32 runs through moe4d::gemm (OpenBLAS; the caller pins BLAS to one thread). bf16 and fp16 run
// through oneDNN's matmul when moe4d was built with it and oneDNN has an optimised (non-reference)
// kernel for this CPU; otherwise the survey reports why not, and no curve is produced for them.
// Not thread-safe (uses BLAS / oneDNN state); single-rank: the caller combines ranks.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "plan/cluster_spec.h"

namespace moe4d {

struct GemmShape {
  int m = 0, n = 0, k = 0;
  std::string label;  // "qkv T=2048 d=512"
  double flops() const { return 2.0 * m * n * k; }
  double size() const;  // cbrt(m n k)
};

struct GemmTiming {
  GemmShape shape;
  double seconds = 0;       // mean over the timed variants (forward, input gradient, weight gradient)
  double best_gflops = 0;   // the fastest single variant (a candidate for the peak)
};

struct GemmSurvey {
  Precision precision = Precision::kFP32;
  bool available = false;
  std::string implementation;  // "OpenBLAS sgemm", oneDNN's implementation name, ...
  std::string reason;          // why not available
  std::vector<GemmTiming> timings;
  double peak_flops = 0;                // FLOP/s
  std::vector<EfficiencyPoint> curve;   // sorted by size
};

using ProgressFn = std::function<void(const std::string&)>;

// The model-shaped grid: `quick` keeps a handful of small shapes (tests), otherwise shapes from d = 128
// to 1024 and T = 128 to 2048 (about 15 s per precision on one core).
std::vector<GemmShape> gemm_survey_shapes(bool quick);

// Times every shape in `precision`; timings only (no peak or curve yet). Unavailable precisions
// return available = false and the reason.
GemmSurvey time_gemm_shapes(Precision precision, const std::vector<GemmShape>& shapes, int repeats,
                            const ProgressFn& progress);

// Fills peak_flops (at least `min_peak_flops`, the best single variant otherwise) and the binned
// efficiency curve from survey.timings. Pure.
void fit_efficiency_curve(GemmSurvey& survey, double min_peak_flops = 0);

}  // namespace moe4d
