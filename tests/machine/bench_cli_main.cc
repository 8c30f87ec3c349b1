// tests/machine/bench_cli_main.cc — a stand-in for the `moe4d` executable with the bench and plan
// subcommands (cli/cmd_bench.cc, cli/cmd_plan.cc), so the command line is tested as users run it:
// `mpirun -np N <driver> bench --quick --output F`, then `<driver> plan CONFIG F`.
#include <cstdio>

#include "cli/commands.h"
#include "core/error.h"

namespace moe4d {
void add_bench_command(CLI::App& app);  // cli/cmd_bench.cc (declared in cli/commands.h once wired into main)
}

int main(int argc, char** argv) {
  CLI::App app{"moe4d bench test driver"};
  app.require_subcommand(1);
  moe4d::add_bench_command(app);
  moe4d::add_plan_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const moe4d::Error& e) {
    std::fprintf(stderr, "moe4d: error: %s\n", e.what());
    return 2;
  }
  return 0;
}
