// cli/cmd_report.cc — `moe4d report METRICS.jsonl|RUN_DIR [--output DIR]`: SVG pictures of a run.
//
// Maps the arguments onto report/run_report.h and prints the files written, one per line; what is
// drawn (and every error message about the metrics file) lives in src/report and is tested there.
#include <fmt/format.h>

#include <memory>
#include <string>

#include "cli/commands.h"
#include "report/rank_times.h"
#include "report/run_report.h"

namespace moe4d {

void add_report_command(CLI::App& app) {
  struct Flags {
    std::string input;
    std::string output;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "report", "draw SVG pictures of a training run (loss, lr, throughput, step time, expert load, pipeline)");
  cmd->add_option("METRICS", flags->input, "a metrics JSONL file, or a run directory containing metrics.jsonl")
      ->required();
  cmd->add_option("--output", flags->output, "directory for the SVG files (default: the metrics file's directory)");
  cmd->callback([flags] {
    const std::string metrics = resolve_metrics_path(flags->input);
    for (const std::string& path : write_run_report(metrics, flags->output)) fmt::print("{}\n", path);
    // Which machine is slow (per-rank compute times, when the run recorded them).
    const RankTimeSummary slow = summarize_rank_times(read_metrics_log(metrics));
    if (slow.ranks > 1) fmt::print("{}\n", describe_rank_times(slow));
  });
}

}  // namespace moe4d
