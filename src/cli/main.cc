// cli/main.cc — the `moe4d` executable: dispatches to the subcommands of cli/commands.h and turns a
// moe4d::Error into one clear line on stderr and a non-zero exit.
#include <cstdio>

#include "cli/commands.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"moe4d: train Mixture-of-Experts transformers with DP x EP x TP x PP parallelism"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "moe4d 0.1.0");
  moe4d::add_prepare_command(app);
  moe4d::add_train_command(app);
  moe4d::add_generate_command(app);
  moe4d::add_plan_command(app);
  moe4d::add_report_command(app);
  moe4d::add_bench_command(app);
  moe4d::add_ckpt_command(app);
  moe4d::add_ckpt_hf_commands(app);  // after add_ckpt_command: adds export/import to it
  moe4d::add_eval_command(app);
  moe4d::add_launch_command(app);
  moe4d::add_version_command(app);
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
