// train/checkpoint_shards.cc — a rank's pieces of a sharded checkpoint, its file, and the records'
// way to rank 0.
#include "train/checkpoint_shards.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "checkpoint/output_file.h"
#include "checkpoint/safetensors.h"
#include "core/error.h"

namespace moe4d {
namespace {

constexpr int kTagRecordSize = 111;
constexpr int kTagRecord = 112;

nlohmann::json record_to_json(const RankShardRecord& r) {
  nlohmann::json pieces = nlohmann::json::array();
  for (const OwnedPiece& p : r.pieces)
    pieces.push_back({p.tensor, p.global_shape, p.piece.key, p.piece.start, p.piece.shape, p.piece.begin, p.piece.end});
  return {{"file", r.file}, {"bytes", r.bytes}, {"sha256", r.sha256}, {"error", r.error}, {"pieces", pieces}};
}

RankShardRecord record_from_json(const nlohmann::json& j) {
  RankShardRecord r;
  r.file = j["file"];
  r.bytes = j["bytes"];
  r.sha256 = j["sha256"];
  r.error = j["error"];
  for (const auto& p : j["pieces"])
    r.pieces.push_back(OwnedPiece{p[0], p[1].get<std::vector<int64_t>>(),
                                  ShardedPiece{r.file, p[2], p[3].get<std::vector<int64_t>>(),
                                               p[4].get<std::vector<int64_t>>(), p[5].get<int64_t>(),
                                               p[6].get<int64_t>()}});
  return r;
}

// The tensor a piece key belongs to: "<tensor>@<begin>".
std::string key_of(const std::string& tensor, int64_t begin) { return fmt::format("{}@{}", tensor, begin); }

}  // namespace

std::vector<RankPiece> rank_checkpoint_pieces(const ParamStore& params, const ZeroLayout& layout,
                                              const GridCoord& coord, const PieceSources& sources) {
  std::vector<RankPiece> out;
  for (const ShardPiece& s : layout.pieces()) {
    const ParamInfo& info = params.info(s.param);
    if (info.is_tied_copy || (info.tp_replicated && coord.tp != 0) || s.count == 0) continue;
    const int g = int(info.group);
    std::vector<int64_t> start;
    for (int d = 0; d < info.global_shape.ndim(); ++d) start.push_back(info.global_start(d));
    const int64_t begin = int64_t(s.flat_begin - info.offset);
    const int64_t end = begin + int64_t(s.count);
    const auto add = [&](const std::string& tensor, const float* base, bool sharded) {
      OwnedPiece owned{tensor, info.global_shape.dims(),
                       ShardedPiece{"", key_of(tensor, begin), start, info.local_shape.dims(), begin, end}};
      out.push_back(RankPiece{std::move(owned), base + (sharded ? s.shard_offset : s.flat_begin)});
    };
    add(info.name, sources.values[g], sources.values_sharded);
    add("exp_avg." + info.name, sources.exp_avg[g], sources.state_sharded);
    add("exp_avg_sq." + info.name, sources.exp_avg_sq[g], sources.state_sharded);
  }
  return out;
}

std::string rank_shard_file_name(int rank) { return fmt::format("rank_{:05d}.safetensors", rank); }

RankShardRecord write_rank_shard(const std::string& tmp_dir, int rank, std::vector<RankPiece> pieces) {
  RankShardRecord record;
  if (pieces.empty()) return record;
  record.file = rank_shard_file_name(rank);
  try {
    NamedTensors tensors;
    for (RankPiece& p : pieces) {
      ShardedPiece& piece = p.owned.piece;
      piece.file = record.file;
      // The views are only read: the writer streams them to disk.
      tensors.emplace_back(piece.key, Tensor::f32(const_cast<float*>(p.data), Shape{piece.end - piece.begin}));
      record.pieces.push_back(p.owned);
    }
    OutputFile out(tmp_dir + "/" + record.file);
    write_safetensors(out, tensors, {{"format", "moe4d-shard"}, {"rank", std::to_string(rank)}});
    record.sha256 = out.finish();
    record.bytes = out.bytes_written();
  } catch (const Error& e) {
    record.error = fmt::format("rank {}: {}", rank, e.what());
  }
  return record;
}

void add_to_index(ShardedIndex& index, const RankShardRecord& record) {
  for (const OwnedPiece& p : record.pieces) {
    ShardedTensor& t = index[p.tensor];
    if (t.pieces.empty()) t.shape = p.global_shape;
    if (t.shape != p.global_shape)
      fail("sharded checkpoint: {} reports tensor '{}' with two shapes", record.file, p.tensor);
    t.pieces.push_back(p.piece);
  }
}

std::vector<RankShardRecord> gather_shard_records(Communicator& world, const RankShardRecord& mine) {
  std::vector<RankShardRecord> out;
  if (world.rank() != 0) {
    const std::string text = record_to_json(mine).dump();
    int64_t size = int64_t(text.size());
    world.send(&size, 1, DType::kI64, 0, kTagRecordSize);
    world.send(text.data(), text.size(), DType::kU8, 0, kTagRecord);
    return out;
  }
  out.push_back(mine);
  for (int r = 1; r < world.size(); ++r) {
    int64_t size = 0;
    world.recv(&size, 1, DType::kI64, r, kTagRecordSize);
    std::string text(size_t(size), '\0');
    world.recv(text.data(), text.size(), DType::kU8, r, kTagRecord);
    out.push_back(record_from_json(nlohmann::json::parse(text)));
  }
  return out;
}

std::string broadcast_text(Communicator& world, std::string text, int root) {
  int64_t size = int64_t(text.size());
  world.broadcast(&size, 1, DType::kI64, root);
  text.resize(size_t(size));
  if (size > 0) world.broadcast(text.data(), text.size(), DType::kU8, root);
  return text;
}

}  // namespace moe4d
