// train/checkpoint_shards.h — what each rank writes into a sharded checkpoint, and the exchange that
// turns the ranks' files into one global index (checkpoint/sharded_index.h, docs/checkpoints.md).
//
// Ownership: a rank writes, for every parameter of which it holds the canonical TP/EP/PP block (not
// the tied last-stage copy of the embedding, and for TP-replicated parameters only on TP rank 0), its
// ZeRO slices of that block (train/zero_layout.h): the data-parallel group (DP x EP for dense
// parameters, DP for experts) splits each bucket into equal slices, so the replicas of a block
// write disjoint parts that cover it once, and no byte is written twice — in every ZeRO stage, as
// Megatron's fully-parallel save spreads the writes over the replicas. The values, exp_avg and
// exp_avg_sq of a slice are streamed from where the rank keeps them (the flat buffers, or the ZeRO
// shards) straight into the rank's safetensors file (contiguous runs, written without staging):
// the extra memory of a save is the safetensors header and the index records, about 200 bytes per
// piece, whatever the model size. Rank 0 holds the global index (records of every rank's pieces).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/sharded_index.h"
#include "model/param_store.h"
#include "parallel/parallel_context.h"
#include "train/zero_layout.h"

namespace moe4d {

// A piece of `tensor` (global shape `global_shape`) as its owner reports it.
struct OwnedPiece {
  std::string tensor;
  std::vector<int64_t> global_shape;
  ShardedPiece piece;  // file filled by write_rank_shard
};

// One contiguous run this rank writes: elements [begin, end) of the tensor's block, from `data`.
struct RankPiece {
  OwnedPiece owned;
  const float* data = nullptr;
};

// Where a rank keeps the three per-element states of a parameter's slice (ZeRO piece).
struct PieceSources {
  const float* values[kNumParamGroups] = {nullptr, nullptr};  // indexed by flat (false) or shard offset
  bool values_sharded = false;                                 // zero_stage 3: values are the shard
  const float* exp_avg[kNumParamGroups] = {nullptr, nullptr};
  const float* exp_avg_sq[kNumParamGroups] = {nullptr, nullptr};
  bool state_sharded = false;                                  // zero_stage >= 1
};

// The pieces this rank owns (see above): for every owned slice, the parameter, exp_avg.<name> and
// exp_avg_sq.<name>.
std::vector<RankPiece> rank_checkpoint_pieces(const ParamStore& params, const ZeroLayout& layout,
                                              const GridCoord& coord, const PieceSources& sources);

// "rank_00003.safetensors"
std::string rank_shard_file_name(int rank);

// The outcome of one rank's write, as sent to rank 0.
struct RankShardRecord {
  std::string file;  // empty: this rank owns nothing
  uint64_t bytes = 0;
  std::string sha256;
  std::string error;  // non-empty: the write failed
  std::vector<OwnedPiece> pieces;
};

// Adds the pieces of `record` to `index` (tensor shapes from the records).
void add_to_index(ShardedIndex& index, const RankShardRecord& record);

// Streams `pieces` into `<tmp_dir>/<rank_shard_file_name(rank)>` (fsync'ed); a failure is reported
// in `error`, never thrown.
RankShardRecord write_rank_shard(const std::string& tmp_dir, int rank, std::vector<RankPiece> pieces);

// Collective over `world`: every rank's record reaches rank 0 (returned there, by rank; empty
// elsewhere). Point-to-point under the communicator's current deadline.
std::vector<RankShardRecord> gather_shard_records(Communicator& world, const RankShardRecord& mine);

// Collective: `text` of world rank `root` on every rank.
std::string broadcast_text(Communicator& world, std::string text, int root);

}  // namespace moe4d
