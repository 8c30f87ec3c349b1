// machine/gemm_survey.cc — timing the model-shaped GEMM grid (fp32 OpenBLAS, bf16/fp16 oneDNN).
#include "machine/gemm_survey.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "core/rng.h"
#include "machine/thread_cpu_time.h"
#include "kernels/gemm.h"

#ifdef MOE4D_HAVE_DNNL
#include <dlfcn.h>

#include <dnnl.hpp>
#endif

namespace moe4d {
namespace {


// Best of `repeats` runs after a warm-up, in this thread's CPU time. The GEMMs are single-threaded,
// so on a quiet machine CPU time is wall time; on a shared one it leaves out the slices other
// processes held the core, which no number of repeats removes from wall time when the machine is
// busy throughout. The best run has cache-warm inputs, as a training step's just-produced
// activations are.
double best_seconds(const std::function<void()>& fn, int repeats) {
  fn();  // warm-up: first-touch pages, BLAS buffers, instruction caches
  double best = 1e300;
  for (int r = 0; r < std::max(1, repeats); ++r) {
    const double t0 = thread_cpu_seconds();
    fn();
    best = std::min(best, thread_cpu_seconds() - t0);
  }
  return best;
}

std::vector<float> random_matrix(size_t n, uint64_t seed) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = normal_at(seed, i);
  return x;
}

GemmSurvey time_fp32(const std::vector<GemmShape>& shapes, int repeats, const ProgressFn& progress) {
  GemmSurvey out;
  out.precision = Precision::kFP32;
  out.available = true;
  out.implementation = "moe4d::gemm (OpenBLAS sgemm, 1 thread)";
  size_t done = 0;
  for (const GemmShape& s : shapes) {
    // One buffer set serves all three variants: A [m,k] / A^T stored [k,m] have the same size, etc.
    std::vector<float> a = random_matrix(size_t(s.m) * s.k, 1), b = random_matrix(size_t(s.k) * s.n, 2);
    std::vector<float> c(size_t(s.m) * s.n);
    double total = 0, best = 0;
    for (int variant = 0; variant < 3; ++variant) {
      const bool ta = variant == 2, tb = variant == 1;  // forward, input gradient, weight gradient
      const int lda = ta ? s.m : s.k, ldb = tb ? s.k : s.n;
      const double t = best_seconds(
          [&] { gemm(ta, tb, s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c.data(), s.n); }, repeats);
      total += t;
      best = std::max(best, s.flops() / t / 1e9);
    }
    out.timings.push_back({s, total / 3, best});
    if (progress && (++done % 16 == 0 || done == shapes.size()))
      progress(fmt::format("fp32 GEMM: {}/{} shapes", done, shapes.size()));
  }
  return out;
}

#ifdef MOE4D_HAVE_DNNL
// Debian's oneDNN threads with OpenMP, which would give every rank all the cores. libgomp is loaded
// with oneDNN but not linked by moe4d, so the setter is looked up at run time.
void pin_openmp_to_one_thread() {
  using SetThreads = void (*)(int);
  if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"))) set(1);
}

GemmSurvey time_dnnl(Precision precision, const std::vector<GemmShape>& shapes, int repeats,
                     const ProgressFn& progress) {
  using dnnl::memory;
  GemmSurvey out;
  out.precision = precision;
  const memory::data_type type =
      precision == Precision::kBF16 ? memory::data_type::bf16 : memory::data_type::f16;
  const uint16_t one = precision == Precision::kBF16 ? 0x3F80 : 0x3C00;  // 1.0: any finite input times the same
  pin_openmp_to_one_thread();
  try {
    dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    dnnl::stream stream(engine);
    size_t done = 0;
    for (const GemmShape& s : shapes) {
      memory::desc a_md({s.m, s.k}, type, memory::format_tag::ab);
      memory::desc b_md({s.k, s.n}, type, memory::format_tag::ab);
      memory::desc c_md({s.m, s.n}, memory::data_type::f32, memory::format_tag::ab);
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), engine);
      const std::string impl = pd.impl_info_str();
      if (impl.find("ref") != std::string::npos) {
        out.reason = fmt::format("oneDNN {} has only its reference (unoptimised) {} matmul for this CPU ({})",
                                 fmt::format("{}.{}", dnnl_version()->major, dnnl_version()->minor),
                                 precision_name(precision), impl);
        out.timings.clear();
        return out;
      }
      out.implementation = "oneDNN matmul " + impl;
      memory a(a_md, engine), b(b_md, engine), c(c_md, engine);
      std::fill_n(static_cast<uint16_t*>(a.get_data_handle()), size_t(s.m) * s.k, one);
      std::fill_n(static_cast<uint16_t*>(b.get_data_handle()), size_t(s.k) * s.n, one);
      dnnl::matmul prim(pd);
      const double t = best_seconds(
          [&] {
            prim.execute(stream, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
            stream.wait();
          },
          repeats);
      out.timings.push_back({s, t, s.flops() / t / 1e9});
      if (progress && (++done % 16 == 0 || done == shapes.size()))
        progress(fmt::format("{} GEMM: {}/{} shapes", precision_name(precision), done, shapes.size()));
    }
  } catch (const dnnl::error& e) {
    out.reason = fmt::format("oneDNN has no {} matmul for this CPU: {}", precision_name(precision), e.what());
    out.timings.clear();
    return out;
  }
  out.available = true;
  return out;
}
#endif

}  // namespace

double GemmShape::size() const { return std::cbrt(double(m) * n * k); }

std::vector<GemmShape> gemm_survey_shapes(bool quick) {
  std::vector<GemmShape> shapes;
  const std::vector<int> tokens = quick ? std::vector<int>{64} : std::vector<int>{128, 512, 2048};
  const std::vector<int> hidden = quick ? std::vector<int>{32, 64} : std::vector<int>{128, 256, 512, 1024};
  for (int t : tokens) {
    for (int d : hidden) {
      const int f = (8 * d / 3 + 15) / 16 * 16;  // SwiGLU's 8d/3, rounded to 16 (688 for d = 256)
      shapes.push_back({t, 3 * d, d, fmt::format("qkv T={} d={}", t, d)});
      shapes.push_back({t, d, d, fmt::format("W_o T={} d={}", t, d)});
      shapes.push_back({t, f, d, fmt::format("W1/W3 T={} d={} f={}", t, d, f)});
      shapes.push_back({t, d, f, fmt::format("W2 T={} d={} f={}", t, d, f)});
      if (d <= 512) shapes.push_back({t, 4096, d, fmt::format("head T={} d={} V=4096", t, d)});
    }
  }
  const std::vector<int> seqs = quick ? std::vector<int>{64} : std::vector<int>{128, 256, 512};
  const std::vector<int> head_dims = quick ? std::vector<int>{16} : std::vector<int>{32, 64, 128};
  for (int s : seqs) {
    for (int hd : head_dims) {
      shapes.push_back({s, s, hd, fmt::format("QK^T S={} hd={}", s, hd)});
      shapes.push_back({s, hd, s, fmt::format("PV S={} hd={}", s, hd)});
    }
  }
  std::sort(shapes.begin(), shapes.end(), [](const GemmShape& a, const GemmShape& b) { return a.size() < b.size(); });
  return shapes;
}

GemmSurvey time_gemm_shapes(Precision precision, const std::vector<GemmShape>& shapes, int repeats,
                            const ProgressFn& progress) {
  if (precision == Precision::kFP32) return time_fp32(shapes, repeats, progress);
#ifdef MOE4D_HAVE_DNNL
  return time_dnnl(precision, shapes, repeats, progress);
#else
  GemmSurvey out;
  out.precision = precision;
  out.reason = fmt::format("moe4d was built without oneDNN, so it has no {} GEMM", precision_name(precision));
  return out;
#endif
}

void fit_efficiency_curve(GemmSurvey& survey, double min_peak_flops) {
  survey.curve.clear();
  survey.peak_flops = min_peak_flops;
  for (const GemmTiming& t : survey.timings) survey.peak_flops = std::max(survey.peak_flops, t.best_gflops * 1e9);
  if (survey.timings.empty() || survey.peak_flops <= 0) return;
  // Bins a factor sqrt(2) wide in size; each bin: FLOP-weighted efficiency at the FLOP-weighted
  // geometric mean size of its shapes.
  struct Bin {
    double flops = 0, seconds = 0, log_size = 0;
  };
  std::map<int, Bin> bins;
  for (const GemmTiming& t : survey.timings) {
    const int index = static_cast<int>(std::floor(std::log2(t.shape.size()) * 2));
    Bin& bin = bins[index];
    bin.flops += t.shape.flops();
    bin.seconds += t.seconds;
    bin.log_size += t.shape.flops() * std::log(t.shape.size());
  }
  for (const auto& [index, bin] : bins) {
    const double efficiency = std::min(1.0, bin.flops / bin.seconds / survey.peak_flops);
    survey.curve.push_back({std::exp(bin.log_size / bin.flops), efficiency});
  }
}

}  // namespace moe4d
