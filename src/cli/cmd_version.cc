// cli/cmd_version.cc — `moe4d version`: what this build contains and which instruction sets it
// needs. `--check-cpu` compares those with this CPU, so a launcher can refuse a host before a
// rank dies of SIGILL (a -DMOE4D_NATIVE=ON build on a machine with fewer instruction sets).
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"

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

struct IsaNeed {
  const char* name;
  bool needed;     // compiled in: the binary executes these instructions
  bool supported;  // this CPU has them
};

std::vector<IsaNeed> isa_needs() {
  __builtin_cpu_init();
  return {
#if defined(__x86_64__)
      {"sse4.2", kCompiledSse42, bool(__builtin_cpu_supports("sse4.2"))},
      {"avx", kCompiledAvx, bool(__builtin_cpu_supports("avx"))},
      {"avx2", kCompiledAvx2, bool(__builtin_cpu_supports("avx2"))},
      {"fma", kCompiledFma, bool(__builtin_cpu_supports("fma"))},
      {"avx512f", kCompiledAvx512f, bool(__builtin_cpu_supports("avx512f"))},
      {"avx512bw", kCompiledAvx512bw, bool(__builtin_cpu_supports("avx512bw"))},
#endif
  };
}

std::string needed_list() {
  std::string out;
  for (const IsaNeed& n : isa_needs()) {
    if (n.needed) out += (out.empty() ? "" : ",") + std::string(n.name);
  }
  return out.empty() ? "baseline x86-64 (portable build)" : out;
}

}  // namespace

void add_version_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("version", "print the version, the optional backends built in and the CPU features the binary needs");
  auto check_cpu = std::make_shared<bool>(false);
  cmd->add_flag("--check-cpu", *check_cpu,
                "exit non-zero if this CPU lacks an instruction set the binary was compiled for");
  cmd->callback([check_cpu] {
#ifdef MOE4D_HAVE_DNNL
    const char* dnnl = "yes";
#else
    const char* dnnl = "no";
#endif
    fmt::print("moe4d 0.1.0 (backends: cpu/openblas, mpi; onednn bf16: {})\n", dnnl);
    fmt::print("cpu features needed: {}\n", needed_list());
    if (!*check_cpu) return;
    std::string missing;
    for (const IsaNeed& n : isa_needs()) {
      if (n.needed && !n.supported) missing += (missing.empty() ? "" : ",") + std::string(n.name);
    }
    if (!missing.empty()) {
      throw Error(fmt::format("this CPU lacks {} that this moe4d binary was compiled for "
                              "(-DMOE4D_NATIVE=ON on another machine); rebuild with the default "
                              "portable build", missing));
    }
    fmt::print("cpu check: PASS\n");
  });
}

}  // namespace moe4d
