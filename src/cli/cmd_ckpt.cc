// cli/cmd_ckpt.cc — `moe4d ckpt inspect | verify | list | consolidate`: look at checkpoints without
// training, and rewrite a sharded one as full tensors.
//
// add_ckpt_command returns the `ckpt` subcommand so that other files can add their own
// subcommands to it (e.g. export/import in their own cmd_*.cc, registered after this one in
// main.cc, or found with app.get_subcommand("ckpt")).
#include <cstdio>

#include <fmt/format.h>

#include "checkpoint/checkpoint_consolidate.h"
#include "checkpoint/checkpoint_inspect.h"
#include "cli/commands.h"
#include "core/error.h"

namespace moe4d {

CLI::App* add_ckpt_command(CLI::App& app) {
  CLI::App* ckpt = app.add_subcommand("ckpt", "inspect, verify and list checkpoints");
  ckpt->require_subcommand(1);

  auto inspect_path = std::make_shared<std::string>();
  CLI::App* inspect = ckpt->add_subcommand(
      "inspect", "step, config, training layout, every tensor (shape, dtype, bytes), totals per parameter group");
  inspect->add_option("checkpoint", *inspect_path, "checkpoint step directory, or checkpoint dir (follows latest)")
      ->required();
  inspect->callback([inspect_path] { std::fputs(inspect_checkpoint(*inspect_path).c_str(), stdout); });

  auto verify_path = std::make_shared<std::string>();
  CLI::App* verify = ckpt->add_subcommand(
      "verify", "check every file against its manifest checksum; a checkpoint dir: every checkpoint and latest");
  verify->add_option("checkpoint", *verify_path, "checkpoint step directory, or checkpoint dir")->required();
  verify->callback([verify_path] {
    verify_checkpoints(*verify_path, [](const std::string& line) { std::printf("%s\n", line.c_str()); });
    std::printf("all checksums match\n");
  });

  auto list_path = std::make_shared<std::string>();
  CLI::App* list = ckpt->add_subcommand("list", "the checkpoints of a run, newest first, with step, time and size");
  list->add_option("dir", *list_path, "checkpoint dir (checkpoint.dir of the run)")->required();
  list->callback([list_path] {
    const auto entries = list_run_checkpoints(*list_path);
    std::printf("%-15s %10s  %-21s %12s\n", "checkpoint", "step", "written (UTC)", "size");
    for (const ListedCheckpoint& e : entries)
      std::printf("%-15s %10lld  %-21s %12s%s\n", e.name.c_str(), static_cast<long long>(e.step), e.time.c_str(),
                  format_bytes(e.bytes).c_str(), e.latest ? "  <- latest" : "");
    if (entries.empty()) std::printf("(no complete checkpoint; 'latest' names a missing one)\n");
  });

  struct ConsolidateArgs {
    std::string checkpoint, output;
    double buffer_mib = 64;
  };
  auto consolidate_args = std::make_shared<ConsolidateArgs>();
  CLI::App* consolidate = ckpt->add_subcommand(
      "consolidate", "write a sharded checkpoint as one full-tensor checkpoint (streamed through a bounded buffer)");
  consolidate->add_option("checkpoint", consolidate_args->checkpoint, "checkpoint step directory, or checkpoint dir")
      ->required();
  consolidate->add_option("--output", consolidate_args->output, "checkpoint dir to write step_<N> and latest into")
      ->required();
  consolidate->add_option("--buffer-mib", consolidate_args->buffer_mib, "read buffer in MiB (default 64)")
      ->check(CLI::Range(0.001, 1048576.0));
  consolidate->callback([consolidate_args] {
    const ConsolidateResult result =
        consolidate_checkpoint(consolidate_args->checkpoint, consolidate_args->output,
                               static_cast<size_t>(consolidate_args->buffer_mib * 1048576.0));
    std::printf("consolidated %zu tensors (%s) into %s\n", result.tensors, format_bytes(result.bytes).c_str(),
                result.path.c_str());
  });
  return ckpt;
}

}  // namespace moe4d
