// report/run_report.h — `moe4d report`: the pictures of one training run, drawn from its metrics
// JSONL file (docs/metrics.md lists the fields and what each picture shows).
//
// Files written into the output directory (those without data are skipped, never written empty):
//   loss.svg                  train loss, total loss with the MoE aux/z terms, and val loss vs step
//   lr.svg                    learning rate (top panel) and gradient norm before clipping (bottom)
//   throughput.svg            tokens/s vs step, and model TFLOP/s when recorded
//   step_time.svg             stacked bars: compute and exposed communication per parallel group
//   expert_load_layer<L>.svg  per MoE layer: tokens/mean per expert and step (heatmap, 1.0 =
//                             balanced) above the max/mean and min/mean ratios vs step
//   pipeline_timeline.svg     the last recorded pipeline schedule (Gantt chart per stage)
//   pipeline_bubble.svg       measured pipeline bubble vs the schedule's formula, per step
//   rank_compute.svg          per rank and step: compute time / the step's median rank (report/rank_times.h)
//   memory.svg                per rank: params / grads / optimizer / peak activations (stacked, last
//                             step) and each rank's total over the steps (device memory when known)
//   moe_losses.svg            MoE aux and z loss, and the dropped fraction of routed slots, vs step
//   comm_share.svg            exposed communication per group as % of the step, with the 15% guideline
//   index.html                (write_run_report) every picture above on one page, with its numbers
// Long runs are averaged over 2, 5, 10, 20, ... steps into at most ~150 bars / heatmap columns,
// aligned to round step numbers, so that the files stay small and the labels read 100, 200, ...
#pragma once

#include <string>
#include <vector>

#include "report/metrics_log.h"

namespace moe4d {

// METRICS.jsonl or RUN_DIR (a directory containing metrics.jsonl) -> the metrics file's path.
// Throws moe4d::Error when neither exists.
std::string resolve_metrics_path(const std::string& metrics_or_run_dir);

// The SVG documents of a run, as (file name, content), in the order listed above (without index.html).
std::vector<std::pair<std::string, std::string>> render_run_report(const MetricsLog& log);

// Reads `metrics_path`, writes the pictures into `output_dir` (created if missing; empty = the
// metrics file's directory) and returns the paths written. Throws moe4d::Error for bad input or an
// unwritable directory.
std::vector<std::string> write_run_report(const std::string& metrics_path, const std::string& output_dir);

}  // namespace moe4d
