// cli/train_setup.h — what `moe4d train` settles before a Trainer exists: where every path points,
// whether the run directory may be written, and where --resume starts (checkpoint/run_dir.h).
#pragma once

#include <cstdint>
#include <string>

#include "config/config.h"

namespace moe4d {

// Makes data.train, data.valid and data.tokenizer (unless "bytes") absolute: relative paths are
// resolved against the working directory, as everywhere in moe4d (docs/config.md). A missing file
// is an error naming the resolved path, the key, the config and what it was resolved against.
void resolve_data_paths(Config& config);

// The metrics file a run writes: --metrics, else train.metrics_file, else
// <checkpoint.dir>/metrics.jsonl, else ./metrics.jsonl.
std::string metrics_path_of(const Config& config, const std::string& metrics_flag);

struct RunStart {
  int64_t resume_step = -1;  // >= 0: resume from <checkpoint.dir>/step_<resume_step>
};

// Rank 0's part of starting a run: proves checkpoint.dir and the metrics file's directory
// writable; a fresh run into a used directory is refused (or, with `start_over`, the old run is
// moved aside); `resume` finds the checkpoint to start from. Logs what it moved or fell back to.
RunStart prepare_run_dir(const Config& config, const std::string& metrics_path, bool resume, bool resume_from_given,
                         bool start_over, bool quiet);

}  // namespace moe4d
