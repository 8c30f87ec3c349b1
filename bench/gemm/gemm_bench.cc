// bench/gemm/gemm_bench.cc — this machine's single-thread GEMM speed (the reference for the training
// step's ">= 85% of sgemm peak" target) and the non-GEMM kernel times at the small-config shapes.
//
// Prints one JSON document: "sgemm" (cblas_sgemm through moe4d::gemm, OpenBLAS pinned to one thread),
// "peak_gflops" (the best sgemm result), "dnnl_bf16" (oneDNN bf16 x bf16 -> f32 matmul, when built
// with oneDNN) and "non_gemm_kernels" (milliseconds per call).
#include <cblas.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "core/rng.h"
#include "kernel_timings.h"
#include "kernels/gemm.h"

#ifdef MOE4D_HAVE_DNNL
#include <omp.h>

#include <dnnl.hpp>
#endif

namespace moe4d::bench {
namespace {

// C[m, n] = op(A) op(B) with op(A) [m, k]; `trans_a`/`trans_b` as the backward passes use them.
struct GemmShape {
  const char* label;
  int m, n, k;
  bool trans_a = false, trans_b = false;
};

const std::vector<GemmShape>& gemm_shapes() {
  static const std::vector<GemmShape> shapes = {
      {"square 256", 256, 256, 256},
      {"square 512", 512, 512, 512},
      {"square 1024", 1024, 1024, 1024},
      {"square 2048", 2048, 2048, 2048},
      {"ffn W1/W3 fwd [2048x512]x[512x1376]", 2048, 1376, 512},
      {"ffn W2 fwd [2048x1376]x[1376x512]", 2048, 512, 1376},
      {"ffn W1 dX [2048x1376]x[1376x512]^T", 2048, 512, 1376, false, true},
      {"ffn W1 dW [512x2048]^Tx[2048x1376]", 512, 1376, 2048, true, false},
      {"tp2 ffn [512x256]x[256x688]", 512, 688, 256},
      {"lm head [2048x512]x[512x4096]", 2048, 4096, 512},
      {"qkv [2048x512]x[512x1536]", 2048, 1536, 512},
  };
  return shapes;
}

std::vector<float> random_matrix(size_t n, uint64_t seed) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = normal_at(seed, i);
  return x;
}

nlohmann::json bench_sgemm(double* peak) {
  nlohmann::json results = nlohmann::json::array();
  for (const GemmShape& s : gemm_shapes()) {
    auto a = random_matrix(static_cast<size_t>(s.m) * s.k, 1);
    auto b = random_matrix(static_cast<size_t>(s.k) * s.n, 2);
    std::vector<float> c(static_cast<size_t>(s.m) * s.n);
    const int lda = s.trans_a ? s.m : s.k, ldb = s.trans_b ? s.k : s.n;
    const double ms = best_ms(
        [&] { gemm(s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c.data(), s.n); }, 3);
    const double gflops = 2.0 * s.m * s.n * s.k / (ms * 1e6);
    *peak = gflops > *peak ? gflops : *peak;
    results.push_back({{"shape", s.label}, {"m", s.m}, {"n", s.n}, {"k", s.k}, {"trans_a", s.trans_a},
                       {"trans_b", s.trans_b}, {"best_ms", ms}, {"gflops", gflops}});
  }
  return results;
}

#ifdef MOE4D_HAVE_DNNL
// bf16 x bf16 -> f32 matmul through oneDNN on one thread. If oneDNN has no optimised bf16 kernel for
// this CPU it either has none at all (reported as unavailable, with the reason) or falls back to its
// reference implementation, which is orders of magnitude slower; then only the smallest shape is
// timed and the implementation name says why.
nlohmann::json bench_dnnl_bf16() {
  using dnnl::memory;
  omp_set_num_threads(1);
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  nlohmann::json results = nlohmann::json::array();
  double peak = 0.0;
  std::string impl;
  for (const GemmShape& s : gemm_shapes()) {
    if (s.trans_a || s.trans_b) continue;
    memory::desc a_md({s.m, s.k}, memory::data_type::bf16, memory::format_tag::ab);
    memory::desc b_md({s.k, s.n}, memory::data_type::bf16, memory::format_tag::ab);
    memory::desc c_md({s.m, s.n}, memory::data_type::f32, memory::format_tag::ab);
    dnnl::matmul::primitive_desc pd;
    try {
      pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, c_md), engine);
    } catch (const dnnl::error& e) {
      // No bf16 matmul at all for this CPU (older oneDNN releases have none without AVX-512).
      return {{"available", false}, {"reason", std::string("oneDNN has no bf16 matmul for this CPU: ") + e.what()}};
    }
    impl = pd.impl_info_str();
    const bool reference = impl.find("ref") != std::string::npos;
    if (reference && s.m * static_cast<int64_t>(s.n) * s.k > 256LL * 256 * 256) continue;
    memory a(a_md, engine), b(b_md, engine), c(c_md, engine);
    // bf16 1.0 = 0x3F80: any finite input will do for timing.
    std::fill_n(static_cast<uint16_t*>(a.get_data_handle()), static_cast<size_t>(s.m) * s.k, uint16_t{0x3F80});
    std::fill_n(static_cast<uint16_t*>(b.get_data_handle()), static_cast<size_t>(s.k) * s.n, uint16_t{0x3F80});
    dnnl::matmul prim(pd);
    const double ms = best_ms(
        [&] {
          prim.execute(stream, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
          stream.wait();
        },
        3);
    const double gflops = 2.0 * s.m * s.n * s.k / (ms * 1e6);
    peak = gflops > peak ? gflops : peak;
    results.push_back({{"shape", s.label}, {"m", s.m}, {"n", s.n}, {"k", s.k}, {"best_ms", ms}, {"gflops", gflops},
                       {"impl", impl}});
  }
  return {{"available", true}, {"results", results}, {"peak_gflops", peak}};
}
#endif

}  // namespace
}  // namespace moe4d::bench

int main() {
  using namespace moe4d::bench;
  openblas_set_num_threads(1);
  nlohmann::json doc;
  doc["threads"] = 1;
  double peak = 0.0;
  doc["sgemm"] = bench_sgemm(&peak);
  doc["peak_gflops"] = peak;
#ifdef MOE4D_HAVE_DNNL
  doc["dnnl_bf16"] = bench_dnnl_bf16();
#else
  doc["dnnl_bf16"] = {{"available", false}, {"reason", "built without oneDNN"}};
#endif
  doc["non_gemm_kernels"] = time_non_gemm_kernels();
  std::printf("%s\n", doc.dump(2).c_str());
  return 0;
}
