// core/cpu_isa.h — the x86-64 instruction sets this build was compiled to use, against this CPU.
//
// The default build targets baseline x86-64 and dispatches its vector kernels at run time; a
// -DMOE4D_NATIVE=ON build is compiled for the build machine and dies of SIGILL on a CPU with fewer
// instruction sets. `moe4d version --check-cpu` and the launcher's preflight use this to refuse such
// a host with a clear line first.
#pragma once

#include <string>
#include <vector>

namespace moe4d {

struct IsaNeed {
  const char* name;  // "avx2", as /proc/cpuinfo and gcc's __builtin_cpu_supports spell it
  bool needed;       // compiled in: the binary executes these instructions
  bool supported;    // this CPU has them
};

std::vector<IsaNeed> isa_needs();
// The needed sets, comma-separated ("" for a portable build).
std::string needed_isa_list();
// The needed sets this CPU lacks, comma-separated ("" when it runs everything the binary uses).
std::string missing_isa_list();
// This CPU's model name from /proc/cpuinfo ("" if unreadable).
std::string cpu_model_name();

}  // namespace moe4d
