// checkpoint/sharded_index.cc — index.json (de)serialisation and block reads from pieces.
#include "checkpoint/sharded_index.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace moe4d {
namespace {

constexpr const char* kIndexFormat = "moe4d-sharded";
constexpr int kIndexVersion = 1;

int64_t product(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::vector<int64_t> int_list(const nlohmann::json& j, const std::string& what) {
  if (!j.is_array() || j.size() > size_t(Shape::kMaxDims)) fail("{} is {}, expected a list of at most {} integers",
                                                                   what, j.dump(), Shape::kMaxDims);
  std::vector<int64_t> out;
  for (const auto& v : j) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0) fail("{} is {}, expected non-negative integers", what, j.dump());
    out.push_back(v.get<int64_t>());
  }
  return out;
}

// Copies what piece `p` (data `src`) holds of range `r` into `dst`; returns the elements copied.
// Walks the rows (last dimension) of the intersection of the two blocks; each row is contiguous in
// both blocks, so it becomes at most one memcpy after clipping to both flat ranges.
int64_t copy_overlap(const ShardedPiece& p, const float* src, const BlockRange& r, float* dst) {
  const int nd = int(r.shape.size());
  int64_t lo[Shape::kMaxDims], hi[Shape::kMaxDims];
  for (int d = 0; d < nd; ++d) {
    lo[d] = std::max(p.start[d], r.start[d]);
    hi[d] = std::min(p.start[d] + p.shape[d], r.start[d] + r.shape[d]);
    if (lo[d] >= hi[d]) return 0;
  }
  int64_t idx[Shape::kMaxDims];
  for (int d = 0; d < nd; ++d) idx[d] = lo[d];
  int64_t copied = 0;
  while (true) {
    int64_t ps = 0, rs = 0;  // flat index of (idx..., lo[last]) in the piece's and the range's blocks
    for (int d = 0; d < nd; ++d) {
      ps = ps * p.shape[d] + (idx[d] - p.start[d]);
      rs = rs * r.shape[d] + (idx[d] - r.start[d]);
    }
    const int64_t len = hi[nd - 1] - lo[nd - 1];
    const int64_t a = std::max(ps, p.begin), b = std::min(ps + len, p.end);
    if (a < b) {
      const int64_t ta = std::max(rs + (a - ps), r.begin), tb = std::min(rs + (b - ps), r.end);
      if (ta < tb) {
        std::memcpy(dst + (ta - r.begin), src + (a - p.begin) + (ta - (rs + (a - ps))), size_t(tb - ta) * sizeof(float));
        copied += tb - ta;
      }
    }
    int d = nd - 2;
    for (; d >= 0; --d) {
      if (++idx[d] < hi[d]) break;
      idx[d] = lo[d];
    }
    if (d < 0) break;
  }
  return copied;
}

}  // namespace

std::string sharded_index_problem(const std::string& dir) {
  const std::string path = dir + "/" + kShardedIndexFile;
  try {
    const Checkpoint checkpoint = Checkpoint::open(dir, [](const std::string&) { return false; });
    const ShardedIndex index = sharded_index_from_json(checkpoint.json(kShardedIndexFile), path);
    for (const auto& [name, tensor] : index)
      for (const ShardedPiece& p : tensor.pieces) {
        if (!checkpoint.has_file(p.file)) return fmt::format("{}: tensor '{}' names {}, which the manifest does not list",
                                                             path, name, p.file);
        const SafetensorsFile& file = checkpoint.tensors(p.file);
        if (!file.contains(p.key)) return fmt::format("{}: {} has no piece '{}' of tensor '{}'", path, p.file, p.key, name);
        const Tensor& t = file.tensor(p.key);
        if (t.dtype != DType::kF32 || t.numel() != p.end - p.begin)
          return fmt::format("{}: piece '{}' in {} is {} {}, the index says F32 with {} elements", path, p.key, p.file,
                             dtype_name(t.dtype), t.shape.str(), p.end - p.begin);
      }
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

BlockRange whole_block(const std::vector<int64_t>& start, const std::vector<int64_t>& shape) {
  return BlockRange{start, shape, 0, product(shape)};
}

void read_from_full(const float* full, const std::vector<int64_t>& shape, const BlockRange& r, float* dst) {
  if (r.start.size() != shape.size() || r.shape.size() != shape.size())
    fail("a block of {} dimensions was asked of a tensor of {}", r.shape.size(), shape.size());
  for (size_t d = 0; d < shape.size(); ++d)
    if (r.start[d] + r.shape[d] > shape[d])
      fail("block [{}] + [{}] lies outside the tensor [{}]", fmt::join(r.start, ","), fmt::join(r.shape, ","),
           fmt::join(shape, ","));
  const ShardedPiece whole{"", "", std::vector<int64_t>(shape.size(), 0), shape, 0, product(shape)};
  copy_overlap(whole, full, r, dst);
}

nlohmann::json sharded_index_to_json(const ShardedIndex& index) {
  nlohmann::json tensors = nlohmann::json::object();
  for (const auto& [name, t] : index) {
    nlohmann::json pieces = nlohmann::json::array();
    for (const ShardedPiece& p : t.pieces)
      pieces.push_back({{"file", p.file}, {"key", p.key}, {"start", p.start}, {"shape", p.shape},
                        {"begin", p.begin}, {"end", p.end}});
    tensors[name] = {{"dtype", "F32"}, {"shape", t.shape}, {"pieces", pieces}};
  }
  return {{"format", kIndexFormat}, {"version", kIndexVersion}, {"tensors", tensors}};
}

ShardedIndex sharded_index_from_json(const nlohmann::json& json, const std::string& origin) {
  if (!json.is_object() || !json.contains("format") || json["format"] != kIndexFormat)
    fail("{}: no \"format\": \"{}\"", origin, kIndexFormat);
  if (!json.contains("version") || json["version"] != kIndexVersion)
    fail("{}: version {}, expected {}", origin, json.value("version", nlohmann::json()).dump(), kIndexVersion);
  if (!json.contains("tensors") || !json["tensors"].is_object()) fail("{}: no \"tensors\" object", origin);
  ShardedIndex index;
  for (const auto& [name, entry] : json["tensors"].items()) {
    const std::string where = fmt::format("{}: tensor '{}'", origin, name);
    if (!entry.is_object() || entry.value("dtype", "") != "F32" || !entry.contains("pieces") ||
        !entry["pieces"].is_array() || !entry.contains("shape"))
      fail("{} is malformed, expected {{\"dtype\": \"F32\", \"shape\": [..], \"pieces\": [..]}}", where);
    ShardedTensor t;
    t.shape = int_list(entry["shape"], where + " shape");
    if (t.shape.empty()) fail("{} has no dimensions", where);
    int64_t covered = 0;
    for (const auto& pj : entry["pieces"]) {
      ShardedPiece p;
      if (!pj.is_object() || !pj.contains("file") || !pj["file"].is_string() || !pj.contains("key") ||
          !pj["key"].is_string() || !pj.contains("begin") || !pj["begin"].is_number_integer() ||
          !pj.contains("end") || !pj["end"].is_number_integer() || !pj.contains("start") || !pj.contains("shape"))
        fail("{} has a malformed piece {}", where, pj.dump());
      p.file = pj["file"];
      p.key = pj["key"];
      p.start = int_list(pj["start"], where + " piece start");
      p.shape = int_list(pj["shape"], where + " piece shape");
      p.begin = pj["begin"];
      p.end = pj["end"];
      if (p.start.size() != t.shape.size() || p.shape.size() != t.shape.size())
        fail("{}: piece {} has {} dimensions, the tensor {}", where, p.key, p.shape.size(), t.shape.size());
      for (size_t d = 0; d < t.shape.size(); ++d)
        if (p.start[d] + p.shape[d] > t.shape[d])
          fail("{}: piece {} block [{}] + [{}] lies outside the tensor [{}]", where, p.key, fmt::join(p.start, ","),
               fmt::join(p.shape, ","), fmt::join(t.shape, ","));
      if (p.begin < 0 || p.end <= p.begin || p.end > product(p.shape))
        fail("{}: piece {} range [{}, {}) is not inside its block of {} elements", where, p.key, p.begin, p.end,
             product(p.shape));
      covered += p.end - p.begin;
      t.pieces.push_back(std::move(p));
    }
    if (covered != product(t.shape))
      fail("{}: the pieces hold {} elements, the tensor has {}", where, covered, product(t.shape));
    index.emplace(name, std::move(t));
  }
  return index;
}

CheckpointTensors::CheckpointTensors(const Checkpoint& checkpoint) : checkpoint_(checkpoint) {
  sharded_ = checkpoint.has_file(kShardedIndexFile);
  if (sharded_) {
    index_ = sharded_index_from_json(checkpoint.json(kShardedIndexFile), checkpoint.file_path(kShardedIndexFile));
    return;
  }
  // A full-tensor checkpoint: every tensor is one piece covering all of it.
  for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
    if (!checkpoint.has_file(file)) continue;
    for (const auto& [name, tensor] : checkpoint.tensors(file).tensors()) {
      ShardedTensor t;
      t.shape = tensor.shape.dims();
      ShardedPiece p{file, name, std::vector<int64_t>(t.shape.size(), 0), t.shape, 0, product(t.shape)};
      t.pieces.push_back(std::move(p));
      index_.emplace(name, std::move(t));
    }
  }
}

bool CheckpointTensors::contains(const std::string& name) const { return index_.count(name) > 0; }

std::vector<std::string> CheckpointTensors::names() const {
  std::vector<std::string> out;
  for (const auto& entry : index_) out.push_back(entry.first);
  return out;
}

std::string CheckpointTensors::file_for(const std::string& name) const {
  if (sharded_) return checkpoint_.path() + "/" + kShardedIndexFile;
  const bool state = name.rfind("exp_avg.", 0) == 0 || name.rfind("exp_avg_sq.", 0) == 0;
  return checkpoint_.path() + "/" + (state ? "optimizer.safetensors" : "model.safetensors");
}

std::vector<int64_t> CheckpointTensors::shape(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end())
    fail("checkpoint {}: {} has no tensor '{}' (was it written for another model config?)", checkpoint_.path(),
         file_for(name), name);
  return it->second.shape;
}

uint64_t CheckpointTensors::bytes(const std::string& name) const {
  uint64_t total = 0;
  auto it = index_.find(name);
  if (it != index_.end())
    for (const ShardedPiece& p : it->second.pieces) total += uint64_t(p.end - p.begin) * sizeof(float);
  return total;
}

size_t CheckpointTensors::pieces(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? 0 : it->second.pieces.size();
}

std::vector<std::string> CheckpointTensors::files() const {
  std::vector<std::string> out;
  for (const auto& entry : index_)
    for (const ShardedPiece& p : entry.second.pieces) out.push_back(p.file);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void CheckpointTensors::read(const std::string& name, const BlockRange& r, float* dst) const {
  const std::vector<int64_t> global = shape(name);
  const auto& tensor = index_.at(name);
  if (r.start.size() != global.size() || r.shape.size() != global.size())
    fail("checkpoint {}: tensor '{}' has {} dimensions, a block of {} was asked for", checkpoint_.path(), name,
         global.size(), r.shape.size());
  for (size_t d = 0; d < global.size(); ++d)
    if (r.start[d] + r.shape[d] > global[d])
      fail("checkpoint {}: block [{}] + [{}] lies outside tensor '{}' [{}]", checkpoint_.path(), fmt::join(r.start, ","),
           fmt::join(r.shape, ","), name, fmt::join(global, ","));
  int64_t copied = 0;
  for (const ShardedPiece& p : tensor.pieces) {
    bool overlaps = true;
    for (size_t d = 0; d < global.size() && overlaps; ++d)
      overlaps = p.start[d] < r.start[d] + r.shape[d] && r.start[d] < p.start[d] + p.shape[d];
    if (!overlaps) continue;
    const SafetensorsFile& file = checkpoint_.tensors(p.file);
    if (!file.contains(p.key))
      fail("checkpoint {}: {} has no tensor '{}' (named by {})", checkpoint_.path(), file.path(), p.key,
           sharded_ ? kShardedIndexFile : "its own header");
    const Tensor& data = file.tensor(p.key);
    if (data.dtype != DType::kF32 || data.shape.numel() != p.end - p.begin)
      fail("checkpoint {}: {} tensor '{}' is {} {}, expected F32 with {} elements", checkpoint_.path(), file.path(),
           p.key, dtype_name(data.dtype), data.shape.str(), p.end - p.begin);
    copied += copy_overlap(p, data.f32(), r, dst);
  }
  if (copied != r.end - r.begin)
    fail("checkpoint {}: the pieces of tensor '{}' cover {} of the {} elements asked for", checkpoint_.path(), name,
         copied, r.end - r.begin);
}

}  // namespace moe4d
