// train/zero_layout.cc — bucket cutting and slice arithmetic (see the header).
#include "train/zero_layout.h"

#include <algorithm>

#include "core/check.h"

namespace moe4d {
namespace {

bool is_embedding_table(const ParamInfo& info) { return info.name == "embed.weight"; }

// The chunk (index into `chunks`) that holds parameters of `layer`.
int chunk_of(int layer, const std::vector<ChunkSpec>& chunks, int num_layers) {
  for (size_t c = 0; c < chunks.size(); ++c) {
    const ChunkSpec& s = chunks[c];
    if ((layer == -1 && s.has_embedding) || (layer == num_layers && s.has_head) ||
        (layer >= s.first_layer && layer < s.first_layer + s.num_layers))
      return static_cast<int>(c);
  }
  MOE4D_CHECK_MSG(false, "layer {} belongs to none of this rank's {} chunks", layer, chunks.size());
  return 0;
}

}  // namespace

size_t ZeroBucket::slice_begin(int r) const { return std::min(end, begin + size_t(r) * slice); }
size_t ZeroBucket::slice_end(int r) const { return std::min(end, begin + size_t(r + 1) * slice); }

ZeroLayout::ZeroLayout(const ParamStore& params, const std::vector<ChunkSpec>& chunks, int num_layers,
                       ZeroBucketing bucketing, int num_buckets, const int ranks[kNumParamGroups],
                       const int rank[kNumParamGroups])
    : num_layers_(num_layers), buckets_of_layer_(num_layers + 2) {
  MOE4D_CHECK(params.finalized());
  MOE4D_CHECK_GE(num_buckets, 1);
  for (int g = 0; g < kNumParamGroups; ++g) {
    MOE4D_CHECK(ranks[g] >= 1 && rank[g] >= 0 && rank[g] < ranks[g]);
    ranks_[g] = ranks[g];
    rank_[g] = rank[g];
  }
  for (ParamGroup group : {ParamGroup::kDense, ParamGroup::kExpert}) {
    const int g = static_cast<int>(group);
    const size_t total = params.flat_size(group);
    flat_size_[g] = total;
    std::vector<int> ids;
    for (int id = 0; id < params.size(); ++id)
      if (params.info(id).group == group) ids.push_back(id);
    if (ids.empty()) continue;
    const size_t target = (total + num_buckets - 1) / num_buckets;
    size_t begin = 0;
    std::vector<int> layers;
    for (size_t i = 0; i < ids.size(); ++i) {
      const ParamInfo& info = params.info(ids[i]);
      if (std::find(layers.begin(), layers.end(), info.layer) == layers.end()) layers.push_back(info.layer);
      const bool last = i + 1 == ids.size();
      const size_t end = last ? total : params.info(ids[i + 1]).offset;
      bool cut = last || is_embedding_table(info);
      if (!last) {
        const ParamInfo& next = params.info(ids[i + 1]);
        cut = cut || is_embedding_table(next) ||
              chunk_of(next.layer, chunks, num_layers) != chunk_of(info.layer, chunks, num_layers);
        if (bucketing == ZeroBucketing::kBySize) cut = cut || end - begin >= target;
        if (bucketing == ZeroBucketing::kByLayer) cut = cut || next.layer != info.layer;
      }
      if (!cut) continue;
      ZeroBucket b;
      b.group = group;
      b.begin = begin;
      b.end = end;
      b.slice = (end - begin + ranks_[g] - 1) / ranks_[g];
      b.shard_offset = shard_size_[g];
      b.chunk = chunk_of(info.layer, chunks, num_layers);
      b.layers = layers;
      b.embedding_table = is_embedding_table(info);
      shard_size_[g] += b.slice;
      for (int layer : layers) buckets_of_layer_[layer + 1].push_back(static_cast<int>(buckets_.size()));
      buckets_.push_back(std::move(b));
      begin = end;
      layers.clear();
    }
  }
  // This rank's slices, cut at parameter boundaries.
  for (const ZeroBucket& b : buckets_) {
    const int g = static_cast<int>(b.group);
    const size_t lo = b.slice_begin(rank_[g]), hi = b.slice_end(rank_[g]);
    if (lo >= hi) continue;
    for (int id = 0; id < params.size(); ++id) {
      const ParamInfo& info = params.info(id);
      if (info.group != b.group) continue;
      const size_t p_lo = std::max(lo, info.offset), p_hi = std::min(hi, info.offset + size_t(info.numel()));
      if (p_lo >= p_hi) continue;
      pieces_.push_back({id, b.group, p_lo, p_hi - p_lo, b.shard_offset + (p_lo - lo)});
    }
  }
}

ZeroStateBytes zero_state_bytes(int zero_stage, const ZeroLayout& layout) {
  size_t full = 0, shard = 0;
  for (ParamGroup g : {ParamGroup::kDense, ParamGroup::kExpert}) {
    full += layout.flat_size(g);
    shard += layout.shard_size(g);
  }
  const size_t f = sizeof(float);
  return {.params = (zero_stage >= 3 ? shard : full) * f,
          .grads = (zero_stage >= 2 ? shard : full) * f,
          .optimizer = 2 * (zero_stage >= 1 ? shard : full) * f};
}

}  // namespace moe4d
