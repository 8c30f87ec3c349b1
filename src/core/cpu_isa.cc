// core/cpu_isa.cc — compile-time instruction-set macros against __builtin_cpu_supports.
#include "core/cpu_isa.h"

#include <fstream>

namespace moe4d {
namespace {

// What the compiler was allowed to emit (the -march of this build).
#if defined(__SSE4_2__)
constexpr bool kCompiledSse42 = true;
#else
constexpr bool kCompiledSse42 = false;
#endif
#if defined(__AVX__)
constexpr bool kCompiledAvx = true;
#else
constexpr bool kCompiledAvx = false;
#endif
#if defined(__AVX2__)
constexpr bool kCompiledAvx2 = true;
#else
constexpr bool kCompiledAvx2 = false;
#endif
#if defined(__FMA__)
constexpr bool kCompiledFma = true;
#else
constexpr bool kCompiledFma = false;
#endif
#if defined(__AVX512F__)
constexpr bool kCompiledAvx512f = true;
#else
constexpr bool kCompiledAvx512f = false;
#endif
#if defined(__AVX512BW__)
constexpr bool kCompiledAvx512bw = true;
#else
constexpr bool kCompiledAvx512bw = false;
#endif

std::string join_names(bool (*keep)(const IsaNeed&)) {
  std::string out;
  for (const IsaNeed& n : isa_needs())
    if (keep(n)) {
      // Appended piece by piece: `"," + std::string(...)` trips GCC 12's -Wrestrict false positive.
      if (!out.empty()) out += ',';
      out += n.name;
    }
  return out;
}

}  // namespace

std::vector<IsaNeed> isa_needs() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return {
      {"sse4.2", kCompiledSse42, bool(__builtin_cpu_supports("sse4.2"))},
      {"avx", kCompiledAvx, bool(__builtin_cpu_supports("avx"))},
      {"avx2", kCompiledAvx2, bool(__builtin_cpu_supports("avx2"))},
      {"fma", kCompiledFma, bool(__builtin_cpu_supports("fma"))},
      {"avx512f", kCompiledAvx512f, bool(__builtin_cpu_supports("avx512f"))},
      {"avx512bw", kCompiledAvx512bw, bool(__builtin_cpu_supports("avx512bw"))},
  };
#else
  return {};
#endif
}

std::string needed_isa_list() {
  return join_names([](const IsaNeed& n) { return n.needed; });
}

std::string missing_isa_list() {
  return join_names([](const IsaNeed& n) { return n.needed && !n.supported; });
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      return colon == std::string::npos ? "" : line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "";
}

}  // namespace moe4d
