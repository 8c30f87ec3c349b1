// cli/cli_flags.h — one command-line grammar for every subcommand, before CLI11 sees it.
//
// moe4d's flags come from two traditions: msrun's `--worker_num`, `--log_dir` and the GNU
// `--dry-run`, `--max-restarts`. Every long flag is accepted in both spellings ('_' and '-' are the
// same character in a flag name); normalize_flags rewrites each to the spelling it was registered
// with, and refuses a flag no spelling matches with the nearest registered one:
// "unknown flag --wroker_num; did you mean --worker_num? (moe4d launch --help lists them)".
// After `--` of `moe4d launch` comes a moe4d command line of its own (`train CONFIG --resume`),
// which is normalized the same way, so that its flags are checked before any rank starts.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace moe4d {

struct NormalizedArgs {
  std::vector<std::string> args;  // the command line without the program name, flags respelled
  std::string command;            // "moe4d launch", "moe4d ckpt export": for messages
  const CLI::App* app = nullptr;  // that command
};

// `args` excludes argv[0]. Throws moe4d::Error for an unknown flag.
NormalizedArgs normalize_flags(const CLI::App& root, const std::vector<std::string>& args);

// The nearest of `candidates` to `name` (edit distance on names with '_' read as '-', or a prefix),
// or "" when none is near.
std::string nearest_name(const std::string& name, const std::vector<std::string>& candidates);

// One line for a CLI11 parse error of `command` (from normalize_flags; app may be null): what it
// says, in moe4d's words.
std::string describe_parse_error(const CLI::ParseError& error, const std::string& command, const CLI::App* app);

}  // namespace moe4d
