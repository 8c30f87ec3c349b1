// cli/main.cc — the `moe4d` executable: dispatches to the subcommands of cli/commands.h and turns a
// moe4d::Error or a command-line error into one clear line on stderr and a non-zero exit (2).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/cli_flags.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/version.h"

int main(int argc, char** argv) {
  CLI::App app{"moe4d: train Mixture-of-Experts transformers with DP x EP x TP x PP parallelism", "moe4d"};
  app.require_subcommand(1);
  app.set_version_flag("--version", moe4d::moe4d_version());
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
  std::string command = "moe4d";
  const CLI::App* command_app = &app;
  try {
    moe4d::NormalizedArgs normalized = moe4d::normalize_flags(app, std::vector<std::string>(argv + 1, argv + argc));
    command = normalized.command;
    command_app = normalized.app;
    std::reverse(normalized.args.begin(), normalized.args.end());  // CLI11 takes a vector last-first
    app.parse(normalized.args);
  } catch (const CLI::RuntimeError& e) {  // a command that failed has printed why
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::fprintf(stderr, "moe4d: error: %s\n", moe4d::describe_parse_error(e, command, command_app).c_str());
    return 2;
  } catch (const moe4d::Error& e) {
    std::fprintf(stderr, "moe4d: error: %s\n", e.what());
    return 2;
  }
  return 0;
}
