// plan/published_runs.h — published training runs the planner is validated against (docs/planner.md
// §Validation), and the planner's prediction for each.
//
// Each run is given as its source states it (model shape, layout, batch, cluster, measured throughput);
// the published step time is derived from the source's own FLOP count and its achieved FLOP/s. The
// prediction evaluates the published DP x TP x PP split on the matching cluster preset with the
// source's recompute setting and no ZeRO, taking the planner's fastest micro-batching and schedule
// of that split (the sources do not all state them). Nothing here is fitted: the runs only check.
// Pure functions.
#pragma once

#include <string>
#include <vector>

#include "plan/layout_evaluator.h"

namespace moe4d {

struct PublishedRun {
  std::string name;      // "gpt-1.7b"
  std::string source;    // citation: paper, table
  std::string cluster;   // cluster preset
  int hidden = 0, heads = 0, layers = 0, vocab = 0, seq = 0;
  int tp = 1, pp = 1, devices = 0;
  int64_t global_batch = 0;
  bool full_recompute = false;
  // Trained with Megatron-LM as of 2021 (unfused square attention, dropout, gradient all-reduce not
  // overlapped with the backward): plan/published_runs.cc's run_context.
  bool legacy_megatron = false;
  double tflops_per_device = 0;  // published achieved FLOP/s per device, / 1e12
  double flops_per_step = 0;     // the source's FLOP count of one step (its formula)
};

struct ValidationRow {
  PublishedRun run;
  double published_step = 0;  // flops_per_step / (tflops_per_device x devices)
  double predicted_step = 0;
  Layout layout;              // the variant the prediction used
  double memory_bytes = 0;    // its peak memory per device (reserve included)
  bool fits = false;          // within the device's memory
  double error() const { return predicted_step / published_step - 1; }
};

// The runs of docs/planner.md's validation table.
std::vector<PublishedRun> published_runs();

// The model, setup and cluster the planner evaluates the run on.
PlanContext run_context(const PublishedRun& run);

// The planner's prediction for one run.
ValidationRow validate_run(const PublishedRun& run);

}  // namespace moe4d
