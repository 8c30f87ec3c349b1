// checkpoint/run_dir.h — the run directory (checkpoint.dir) as a whole: is it in use, may this
// process write to it, where does --resume start, and moving an old run aside.
//
// Rules (docs/config.md, "checkpoint"):
// - A fresh run never writes into a directory that holds another run's checkpoints or metrics:
//   `moe4d train` refuses, naming the two ways on (--resume, or --start-over, which renames the old
//   run to `<dir>.old-<UTC time>` — nothing is ever deleted).
// - --resume starts from the newest step directory that verifies, each judged on its own manifest:
//   normally the one `latest` names. When `latest` is missing, damaged (its bytes printed escaped),
//   names a corrupt, missing or older directory, the notice names it and says why. A damaged
//   `latest` never rules out the intact directory it (partly) names. It never starts from step 0
//   while any checkpoint exists.
//
// All functions are plain file-system work for one process (the CLI calls them on rank 0 and
// shares the outcome); failures are moe4d::Error with one line naming the path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moe4d {

// What a run directory already holds.
struct RunDirContents {
  std::vector<std::string> checkpoints;  // step directory names, oldest first
  bool has_latest = false;
  bool has_metrics = false;               // the metrics file exists and is not empty
  bool used() const { return !checkpoints.empty() || has_latest || has_metrics; }
  // "2 checkpoints (step_00000010 .. step_00000020), latest, metrics.jsonl"
  std::string describe(const std::string& metrics_path) const;
};

// Looks at `dir` (may not exist) and the metrics file at `metrics_path` (may lie elsewhere).
RunDirContents inspect_run_dir(const std::string& dir, const std::string& metrics_path);

// The one-line refusal for a fresh run into a used directory.
std::string used_run_dir_message(const std::string& dir, const RunDirContents& contents,
                                 const std::string& metrics_path);

// Renames `dir` to `<dir>.old-<YYYYmmddTHHMMSSZ>` (and a metrics file outside it to
// `<file>.old-<same>`); returns the new name of the directory (or of the metrics file when only it
// existed). Fails, leaving everything in place, if the target names exist.
std::string move_run_aside(const std::string& dir, const std::string& metrics_path);

// Creates `dir` if needed and proves it writable by creating and removing a probe file. Fails with
// "checkpoint.dir X is not writable: Read-only file system" (or the creation's own reason).
void require_writable_dir(const std::string& dir, const std::string& what);

// Where --resume starts.
struct ResumePoint {
  std::string path;    // a verified step directory; empty: the directory holds no checkpoint
  int64_t step = 0;
  std::string notice;  // non-empty when `latest` was not used, or newer directories were refused: says why
};

// Verifies the step directories under `root` newest first and takes the first that verifies. Fails if
// checkpoints exist but none verifies, listing why each was refused.
ResumePoint find_resume_point(const std::string& root);

}  // namespace moe4d
