#include "train/tensor_gather.h"

#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace moe4d {
namespace {
constexpr int kTagHeaderSize = 101;
constexpr int kTagHeader = 102;
constexpr int kTagData = 103;

Tensor shard_view(const ParamInfo& info, const Tensor& full) {
  Tensor view = full;
  for (const ShardSpec& s : info.shards) view = view.slice(s.dim, info.global_start(s.dim), info.local_shape[s.dim]);
  return view;
}

void place_shard(std::map<std::string, FullTensor>& out, const std::string& name, const Shape& global,
                 const ParamInfo& layout, const float* data) {
  auto it = out.find(name);
  if (it == out.end()) {
    FullTensor t{global, Buffer(size_t(global.numel()) * sizeof(float))};
    it = out.emplace(name, std::move(t)).first;
  }
  copy_from_contiguous(data, shard_view(layout, Tensor::f32(it->second.data.f32(), global)));
}
}  // namespace

bool is_canonical_copy(const ParamInfo& info, const GridCoord& coord) {
  if (info.is_tied_copy || coord.dp != 0) return false;
  if (info.group == ParamGroup::kDense && coord.ep != 0) return false;
  if (info.tp_replicated && coord.tp != 0) return false;
  return true;
}

std::map<std::string, FullTensor> gather_full_tensors(ParallelContext& pc, const ParamStore& params,
                                                      const std::function<const float*(int id)>& source) {
  std::map<std::string, FullTensor> out;
  Communicator& world = *pc.world;
  const bool root = world.rank() == 0;
  if (!root && pc.coord.dp != 0) return out;  // holds nothing unique

  // This rank's contribution: a JSON header describing each shard, and the shards back to back.
  nlohmann::json header = nlohmann::json::array();
  std::vector<int> ids;
  size_t total = 0;
  for (int id = 0; id < params.size(); ++id) {
    const ParamInfo& info = params.info(id);
    if (!is_canonical_copy(info, pc.coord)) continue;
    ids.push_back(id);
    nlohmann::json shards = nlohmann::json::array();
    for (const ShardSpec& s : info.shards) shards.push_back({s.dim, s.parts, s.index});
    header.push_back({{"name", info.name}, {"shape", info.global_shape.dims()}, {"shards", shards}});
    total += size_t(info.numel());
  }

  if (!root) {
    std::string text = header.dump();
    int64_t sizes[2] = {static_cast<int64_t>(text.size()), static_cast<int64_t>(total)};
    world.send(sizes, 2, DType::kI64, 0, kTagHeaderSize);
    world.send(text.data(), text.size(), DType::kU8, 0, kTagHeader);
    Buffer packed(total * sizeof(float));
    size_t offset = 0;
    for (int id : ids) {
      copy_bytes(packed.f32() + offset, packed.device(), source(id), params.device(),
                 sizeof(float) * params.info(id).numel());
      offset += size_t(params.info(id).numel());
    }
    world.send(packed.data(), total, DType::kF32, 0, kTagData);
    return out;
  }

  for (int id : ids) place_shard(out, params.info(id).name, params.info(id).global_shape, params.info(id), source(id));
  for (int r = 1; r < world.size(); ++r) {
    if (pc.grid.coord(r).dp != 0) continue;
    int64_t sizes[2];
    world.recv(sizes, 2, DType::kI64, r, kTagHeaderSize);
    std::string text(size_t(sizes[0]), '\0');
    world.recv(text.data(), text.size(), DType::kU8, r, kTagHeader);
    Buffer packed(size_t(sizes[1]) * sizeof(float));
    world.recv(packed.data(), size_t(sizes[1]), DType::kF32, r, kTagData);
    size_t offset = 0;
    for (const auto& entry : nlohmann::json::parse(text)) {
      ParamInfo layout;
      layout.name = entry["name"];
      layout.global_shape = Shape::of(entry["shape"].get<std::vector<int64_t>>());
      layout.local_shape = layout.global_shape;
      for (const auto& s : entry["shards"]) {
        ShardSpec spec{s[0].get<int>(), s[1].get<int>(), s[2].get<int>()};
        layout.shards.push_back(spec);
        layout.local_shape[spec.dim] = layout.global_shape[spec.dim] / spec.parts;
      }
      place_shard(out, layout.name, layout.global_shape, layout, packed.f32() + offset);
      offset += size_t(layout.local_shape.numel());
    }
  }
  return out;
}

}  // namespace moe4d
