// cli/train_setup.h — what `moe4d train` settles before a Trainer exists: where every path points,
// whether the run directory may be written, and where --resume starts (checkpoint/run_dir.h).
#pragma once

#include <cstdint>
#include <string>

#include "config/config.h"
#include "data/data_check.h"

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

// How `moe4d train` was asked to start (its flags).
struct RunDirRequest {
  bool resume = false;         // --resume: continue from the newest checkpoint in checkpoint.dir, if any
  bool resume_strict = false;  // --resume-strict: like --resume, but no checkpoint there is an error
  std::string resume_from;     // --resume-from CKPT
  bool start_over = false;     // --start-over
  // The run's tokenizer (preflight); the checkpoint resumed from must have been trained with it.
  const TokenizerAgreement* tokenizer = nullptr;
};

// Rank 0's part of starting a run: proves checkpoint.dir and the metrics file's directory
// writable; a fresh run into a used directory is refused (or, with `start_over`, the old run is
// moved aside); `resume` finds the checkpoint to start from — when there is none, a WARNING names
// the directory searched (`resume_strict`: an error); the checkpoint resumed from (found, or
// resume_from) must carry the run's tokenizer. Logs what it moved or fell back to.
RunStart prepare_run_dir(const Config& config, const std::string& metrics_path, const RunDirRequest& request);

// Throws moe4d::Error with one line when the checkpoint at `path` (a step directory, or a root
// whose `latest` is followed) was trained with a tokenizer other than `expected`; `expected_says`
// names that side in the message ("data.tokenizer /d/tokenizer.model is"). Checkpoints that record
// no tokenizer, and paths that are not checkpoints (left to the loader), pass.
void check_checkpoint_tokenizer(const std::string& path, const TokenizerIdentity& expected,
                                const std::string& expected_says);

}  // namespace moe4d
