// checkpoint/checkpoint_inspect.h — what `moe4d ckpt inspect | verify | list` report.
//
// These read checkpoints (checkpoint/checkpoint.h) without loading a model: inspect describes one
// (step, config, the layout it was trained with, every tensor, totals per parameter group, the
// optimizer state and the tokenizer it carries), verify checks every file against its manifest
// (and that safetensors headers and JSON files parse), list shows the checkpoints of a run.
//
// Parameter groups follow the trainer's (model/param_store.h): tensors of routed experts
// (`*.moe.experts.*`) are the expert group, everything else is dense. Functions are pure reads,
// safe to run while a trainer writes into the same root (they see committed checkpoints only).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace moe4d {

// A step directory, or a root whose `latest` is followed.
std::string resolve_checkpoint_dir(const std::string& path);

// Human-readable report of one checkpoint. Verifies the checkpoint first (a corrupt one is a
// moe4d::Error naming the file).
std::string inspect_checkpoint(const std::string& path);

struct FileCheck {
  std::string path;     // the file's full path
  uint64_t bytes = 0;   // as found on disk
  std::string sha256;   // as computed (empty if unreadable)
  std::string problem;  // empty: matches the manifest and parses
};

struct CheckpointCheck {
  std::string dir;
  int64_t step = -1;
  std::vector<FileCheck> files;
  std::string problem;  // manifest-level problem (missing, not JSON, wrong format or step); empty: fine
  bool ok() const;
};

// Checks every file of one step directory (all of them, not stopping at the first failure).
CheckpointCheck verify_checkpoint(const std::string& step_dir);

// Checks a step directory, or every checkpoint of a root plus its `latest` pointer, passing one
// report line per file to `on_line`. Then fails (moe4d::Error naming the first failing file and
// how many failed) if any check failed.
void verify_checkpoints(const std::string& path, const std::function<void(const std::string&)>& on_line);

struct ListedCheckpoint {
  std::string name;  // step_00000020
  int64_t step = 0;
  std::string time;  // UTC time its manifest was written, "2026-12-01 09:30:12Z"
  uint64_t bytes = 0;
  bool latest = false;
};

// The complete checkpoints of a run, newest first. A directory that is not a checkpoint root is a
// moe4d::Error.
std::vector<ListedCheckpoint> list_run_checkpoints(const std::string& root);

// "1.20 MiB", "512 B".
std::string format_bytes(uint64_t bytes);

}  // namespace moe4d
