// checkpoint/sharded_index.h — the global index of a sharded checkpoint, and reading any block of a
// tensor from either checkpoint format.
//
// A sharded checkpoint (checkpoint.format: sharded, docs/checkpoints.md) stores each tensor as pieces
// written by the ranks that own them, in per-rank safetensors files, plus `index.json`:
//   {"format": "moe4d-sharded", "version": 1,
//    "tensors": {"<name>": {"dtype": "F32", "shape": [global dims],
//                           "pieces": [{"file": "rank_00003.safetensors", "key": "<name>@<begin>",
//                                       "start": [..], "shape": [..], "begin": b, "end": e}, ...]}}}
// A piece is the flat elements [begin, end) of the row-major block of the global tensor that starts
// at `start` and has shape `shape` (a rank's TP/EP slice; [begin, end) its ZeRO or data-parallel part),
// stored as a 1-D tensor `key` of end - begin elements. The pieces of a tensor cover it exactly once.
// Tensor names are the global ones: parameters `<name>`, AdamW moments `exp_avg.<name>` and
// `exp_avg_sq.<name>`, the same names a full-tensor checkpoint uses (model.safetensors and
// optimizer.safetensors).
//
// CheckpointTensors reads any flat range of any block of a tensor from a verified Checkpoint, of
// either format, touching only the pieces (and, through the memory mapping, only the pages) that
// overlap it. Not thread-safe (the Checkpoint maps files lazily).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "core/tensor.h"

namespace moe4d {

inline constexpr const char* kShardedIndexFile = "index.json";

struct ShardedPiece {
  std::string file;  // safetensors file of the step directory
  std::string key;   // 1-D F32 tensor in it
  std::vector<int64_t> start, shape;  // the block, in global coordinates
  int64_t begin = 0, end = 0;         // flat range of the block
};

struct ShardedTensor {
  std::vector<int64_t> shape;  // global
  std::vector<ShardedPiece> pieces;
};

using ShardedIndex = std::map<std::string, ShardedTensor>;

nlohmann::json sharded_index_to_json(const ShardedIndex& index);
// Validates the structure (types, ranks, blocks inside the tensor, ranges inside the blocks, and that
// the pieces' sizes add up to each tensor's size); one moe4d::Error naming `origin` and the tensor.
ShardedIndex sharded_index_from_json(const nlohmann::json& json, const std::string& origin);

// Checks the index of the sharded step directory `dir` (assumed checksummed already): it parses and
// validates, and every piece's key is in its file as F32 with the right element count. Returns the
// first problem, or "" when there is none.
std::string sharded_index_problem(const std::string& dir);

// Where in a block to read: the block at `start` with shape `shape` (global coordinates), its flat
// elements [begin, end).
struct BlockRange {
  std::vector<int64_t> start, shape;
  int64_t begin = 0, end = 0;
};
// The whole of a block.
BlockRange whole_block(const std::vector<int64_t>& start, const std::vector<int64_t>& shape);

// Copies elements [r.begin, r.end) of block r of the row-major tensor `full` (global shape `shape`)
// into dst. Throws moe4d::Error if the block lies outside the tensor.
void read_from_full(const float* full, const std::vector<int64_t>& shape, const BlockRange& r, float* dst);

class CheckpointTensors {
 public:
  // Borrows `checkpoint`, which must outlive this object. A checkpoint with index.json is sharded;
  // otherwise model.safetensors (and optimizer.safetensors when present) hold full tensors.
  explicit CheckpointTensors(const Checkpoint& checkpoint);

  bool sharded() const { return sharded_; }
  bool contains(const std::string& name) const;
  // Every tensor name, sorted.
  std::vector<std::string> names() const;
  // Global shape; a missing tensor is a moe4d::Error naming the file that should hold it.
  std::vector<int64_t> shape(const std::string& name) const;
  // Bytes on disk of the tensor (all its pieces), and how many pieces it has.
  uint64_t bytes(const std::string& name) const;
  size_t pieces(const std::string& name) const;
  // The files holding pieces, sorted.
  std::vector<std::string> files() const;
  // The file a missing `name` is looked for in (for messages).
  std::string file_for(const std::string& name) const;

  // Copies elements [r.begin, r.end) of the block r of tensor `name` into dst (r.end - r.begin
  // floats). Throws moe4d::Error if the block lies outside the tensor or the pieces do not cover it.
  void read(const std::string& name, const BlockRange& r, float* dst) const;

 private:
  const Checkpoint& checkpoint_;
  bool sharded_ = false;
  ShardedIndex index_;
};

}  // namespace moe4d
