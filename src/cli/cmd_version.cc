// cli/cmd_version.cc — `moe4d version`: what this build contains.
#include <fmt/format.h>

#include "cli/commands.h"

namespace moe4d {

void add_version_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("version", "print the version and the optional backends built in");
  cmd->callback([] {
#ifdef MOE4D_HAVE_DNNL
    const char* dnnl = "yes";
#else
    const char* dnnl = "no";
#endif
    fmt::print("moe4d 0.1.0 (backends: cpu/openblas, mpi; onednn bf16: {})\n", dnnl);
  });
}

}  // namespace moe4d
