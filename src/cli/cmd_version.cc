// cli/cmd_version.cc — `moe4d version`: what this build contains and which instruction sets it
// needs. `--check-cpu` compares those with this CPU, so a launcher can refuse a host before a
// rank dies of SIGILL (a -DMOE4D_NATIVE=ON build on a machine with fewer instruction sets).
#include <fmt/format.h>

#include <memory>
#include <string>

#include "cli/commands.h"
#include "core/cpu_isa.h"
#include "core/error.h"
#include "core/version.h"

namespace moe4d {
namespace {

std::string needed_list() {
  const std::string needed = needed_isa_list();
  return needed.empty() ? "baseline x86-64 (portable build)" : needed;
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
    fmt::print("{} (backends: cpu/openblas, mpi; onednn bf16: {})\n", moe4d_version(), dnnl);
    fmt::print("cpu features needed: {}\n", needed_list());
    if (!*check_cpu) return;
    const std::string missing = missing_isa_list();
    if (!missing.empty()) {
      throw Error(fmt::format("this CPU lacks {} that this moe4d binary was compiled for "
                              "(-DMOE4D_NATIVE=ON on another machine); rebuild with the default "
                              "portable build", missing));
    }
    fmt::print("cpu check: PASS\n");
  });
}

}  // namespace moe4d
