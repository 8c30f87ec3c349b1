// cli/commands.h — the moe4d subcommands. Each add_*_command registers its options and callback on
// the CLI11 app; callbacks throw moe4d::Error for bad input, which main() prints as one line.
// This layer is the only place that reads the environment or touches process-wide settings.
#pragma once

#include <CLI/CLI.hpp>

namespace moe4d {

void add_version_command(CLI::App& app);
void add_prepare_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_generate_command(CLI::App& app);
void add_plan_command(CLI::App& app);
void add_report_command(CLI::App& app);
void add_bench_command(CLI::App& app);
// Returns the `ckpt` app, to which other files may add subcommands (cli/cmd_ckpt.cc).
CLI::App* add_ckpt_command(CLI::App& app);
void add_eval_command(CLI::App& app);
// Adds `export` and `import` to the `ckpt` subcommand (creating it if absent).
void add_ckpt_hf_commands(CLI::App& app);
void add_launch_command(CLI::App& app);

}  // namespace moe4d
