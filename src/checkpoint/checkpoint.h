// checkpoint/checkpoint.h — atomic, checksummed checkpoint directories.
//
// On disk a checkpoint root holds
//   <root>/step_<8-digit step>/   any files (model.safetensors, optimizer.safetensors, state.json, ...)
//                                 plus MANIFEST.json = {"format": "moe4d-checkpoint", "version": 1,
//                                 "step": S, "files": {"<name>": {"bytes": B, "sha256": "<hex>"}}}
//   <root>/latest                 text: the name of the newest committed step directory
// A step directory exists under its final name only once every file in it, and its manifest, are
// on disk and fsync'ed; `latest` is replaced atomically after that. A writer killed at any moment
// therefore leaves the previous checkpoint and `latest` intact; its temporary directory
// (`.tmp-step_<S>-<pid>`) is removed by the next writer that commits.
//
// Reading verifies every file of the manifest (presence, size, SHA-256) before anything is used,
// and refuses a mismatch with one line naming the file and the previous checkpoint to fall back to.
//
// One process at a time commits into a root (a distributed save gathers into, or is committed by,
// one rank): commit's retention and `latest` update assume no concurrent writer. Dead writers are
// recognised by pid, so roots shared by several hosts need one writer host. Objects are move-only
// and not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"

namespace moe4d {

// The name under which a checkpoint carries its sentencepiece tokenizer model.
inline constexpr const char* kCheckpointTokenizerFile = "tokenizer.model";

// "step_00000020"
std::string checkpoint_dir_name(int64_t step);
// True when `name` is a step directory name exactly as checkpoint_dir_name writes it; sets `step`.
bool parse_checkpoint_dir_name(const std::string& name, int64_t& step);

// File contents made safe for a one-line message: printable ASCII stays, everything else is escaped
// (\n, \t, \r, \\, \xNN), and more than `max_bytes` bytes end in "...(N bytes)".
std::string escaped_text(const std::string& bytes, size_t max_bytes = 64);

// Builds one checkpoint in a temporary directory and publishes it with commit(). Files are streamed
// to disk as they are added (hashed on the way), so the writer holds no copy of the tensors.
// Destroying a writer without commit() removes its temporary directory.
class CheckpointWriter {
 public:
  // Creates `dir` if needed and the temporary directory `<dir>/.tmp-step_<S>-<pid>`.
  CheckpointWriter(std::string dir, int64_t step);
  ~CheckpointWriter();
  CheckpointWriter(CheckpointWriter&& other) noexcept;
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(CheckpointWriter&&) = delete;

  // `file_name` is a plain name (no '/', not starting with '.', not MANIFEST.json), unique within
  // the checkpoint; anything else is a moe4d::Error.
  void add_safetensors(const std::string& file_name, const NamedTensors& tensors,
                       const SafetensorsMetadata& metadata = {});
  void add_json(const std::string& file_name, const nlohmann::json& value);
  // Copies the file at `source` into the checkpoint (streamed, hashed on the way); returns its
  // sha256. Used to make a checkpoint self-contained (its tokenizer model).
  std::string add_file_copy(const std::string& file_name, const std::string& source);
  // Writes file `file_name` through `write` (streamed, hashed on the way).
  void add_stream(const std::string& file_name, const std::function<void(OutputFile&)>& write);
  // Records a file that another process wrote (and fsync'ed) into tmp_dir() — a rank's shard of a
  // sharded checkpoint — with the size and sha256 it computed while writing. Fails if the file is
  // absent or has another size.
  void add_written_file(const std::string& file_name, uint64_t bytes, const std::string& sha256);
  // Where the files of this checkpoint are written until commit() (empty once committed).
  const std::string& tmp_dir() const { return tmp_dir_; }

  // Publishes the checkpoint as `<dir>/step_<S>` (replacing an existing one only once the new one
  // is complete), points `latest` at it, then deletes the oldest complete checkpoints so that at
  // most `keep` remain (never the one just written) and removes temporary directories of writers
  // that are no longer running. Returns the step directory's path. The writer is spent afterwards.
  std::string commit(int keep);

  const std::string& dir() const { return dir_; }
  int64_t step() const { return step_; }

 private:
  void check_new_file(const std::string& file_name) const;

  std::string dir_;
  int64_t step_ = 0;
  std::string tmp_dir_;  // empty once committed (or moved from)
  std::map<std::string, std::pair<uint64_t, std::string>> files_;  // name -> (bytes, sha256)
};

// A complete checkpoint found under a root: its step and directory path.
struct CheckpointEntry {
  int64_t step = 0;
  std::string path;
};

// The complete checkpoints (step directories with a MANIFEST.json) under `root`, by increasing
// step. Manifests are not verified here. A missing root gives an empty list.
std::vector<CheckpointEntry> list_checkpoints(const std::string& root);

// A verified checkpoint. Files are read lazily after verification; safetensors files are
// memory-mapped once and cached.
class Checkpoint {
 public:
  // `path` is a step directory, or a checkpoint root whose `latest` is followed. Throws
  // moe4d::Error if it is neither, or if the manifest does not match the files, e.g.
  // `checkpoint runs/ckpt/step_00000020 is corrupt: model.safetensors sha256 mismatch (expected
  // 3fa1…, got 9b02…); previous checkpoint: runs/ckpt/step_00000010`.
  static Checkpoint open(const std::string& path);
  // The same, but the sha256 of a file is checked only where `hash_file(name)` is true (presence and
  // size always): for ranks that verify a share of a sharded checkpoint each and agree on the result.
  static Checkpoint open(const std::string& path, const std::function<bool(const std::string&)>& hash_file);

  int64_t step() const { return step_; }
  const std::string& path() const { return path_; }
  // Names of the files in the manifest.
  std::vector<std::string> files() const;
  bool has_file(const std::string& name) const { return files_.count(name) > 0; }
  // The path of a manifest file; throws moe4d::Error if the manifest does not list `name`.
  std::string file_path(const std::string& name) const;
  const SafetensorsFile& tensors(const std::string& name) const;
  nlohmann::json json(const std::string& name) const;

 private:
  Checkpoint() = default;

  std::string path_;
  int64_t step_ = 0;
  std::map<std::string, uint64_t> files_;  // name -> bytes
  mutable std::map<std::string, std::unique_ptr<SafetensorsFile>> mapped_;
};

}  // namespace moe4d
