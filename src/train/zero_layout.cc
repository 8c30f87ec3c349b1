// train/zero_layout.cc — bucket cutting and slice arithmetic (see the header).
#include "train/zero_layout.h"

#include <algorithm>

#include "core/check.h"

namespace moe4d {
namespace {

constexpr size_t kAlignFloats = 16;    // the ParamStore's alignment of every parameter
constexpr size_t kPageFloats = 1024;   // one 4 KiB page of floats

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

size_t default_bucket_elements(int ranks) { return std::max<size_t>(40000000, size_t(1000000) * size_t(ranks)); }

ZeroBucketing zero_bucketing(const ParallelConfig& parallel, const int ranks[kNumParamGroups]) {
  ZeroBucketing b;
  b.count = parallel.gradient_aggregation_group;
  for (int g = 0; g < kNumParamGroups; ++g)
    b.elements[g] = parallel.grad_bucket_size > 0 ? size_t(parallel.grad_bucket_size) : default_bucket_elements(ranks[g]);
  return b;
}

ZeroLayout::ZeroLayout(const ParamStore& params, const std::vector<ChunkSpec>& chunks, int num_layers,
                       const ZeroBucketing& bucketing, const int ranks[kNumParamGroups],
                       const int rank[kNumParamGroups])
    : num_layers_(num_layers), buckets_of_layer_(num_layers + 2) {
  MOE4D_CHECK(params.finalized());
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
    size_t target = bucketing.count > 0 ? (total + bucketing.count - 1) / size_t(bucketing.count) : bucketing.elements[g];
    MOE4D_CHECK_GE(target, size_t(1));
    // Multiples of 16 keep every bucket a multiple of the parameters' alignment (no padding for 2, 4,
    // 8 or 16 ranks); whole pages of floats let a bucket's pages be returned alone.
    const size_t unit = target >= kPageFloats ? kPageFloats : kAlignFloats;
    target = (target + unit - 1) / unit * unit;
    bucket_elements_[g] = target;
    // Cut points: the multiples of the bucket size, chunk changes, and the embedding table's ends
    // with the multiples of the bucket size counted from the table's start inside it (the tied copy
    // sits at another offset on the last stage and must be cut the same way).
    std::vector<size_t> cuts = {0, total};
    size_t table_begin = total, table_end = total;
    for (size_t i = 0; i < ids.size(); ++i) {
      const ParamInfo& info = params.info(ids[i]);
      const size_t end = i + 1 == ids.size() ? total : params.info(ids[i + 1]).offset;
      if (is_embedding_table(info)) {
        table_begin = info.offset;
        table_end = end;
        for (size_t at = info.offset; at < end; at += target) cuts.push_back(at);
        cuts.push_back(end);
      }
      if (i + 1 < ids.size() && chunk_of(params.info(ids[i + 1]).layer, chunks, num_layers) !=
                                    chunk_of(info.layer, chunks, num_layers))
        cuts.push_back(end);
    }
    for (size_t at = target; at < total; at += target)
      if (at < table_begin || at >= table_end) cuts.push_back(at);
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    // Ranges [cuts[k], cuts[k+1]); one holding no parameter (inside an alignment gap before a forced
    // cut) joins the previous bucket.
    size_t first_param = 0;  // first id (index into ids) that may overlap the next range
    for (size_t k = 0; k + 1 < cuts.size(); ++k) {
      const size_t begin = cuts[k], end = cuts[k + 1];
      std::vector<int> layers;
      bool table = false;
      int chunk = -1;
      while (first_param < ids.size() &&
             params.info(ids[first_param]).offset + size_t(params.info(ids[first_param]).numel()) <= begin)
        ++first_param;
      for (size_t i = first_param; i < ids.size() && params.info(ids[i]).offset < end; ++i) {
        const ParamInfo& info = params.info(ids[i]);
        if (info.offset + size_t(info.numel()) <= begin) continue;
        if (std::find(layers.begin(), layers.end(), info.layer) == layers.end()) layers.push_back(info.layer);
        table = table || is_embedding_table(info);
        chunk = chunk_of(info.layer, chunks, num_layers);
      }
      if (layers.empty()) {
        MOE4D_CHECK(!buckets_.empty() && buckets_.back().group == group);
        ZeroBucket& prev = buckets_.back();
        shard_size_[g] -= prev.slice;
        prev.end = end;
        prev.slice = (prev.end - prev.begin + ranks_[g] - 1) / ranks_[g];
        shard_size_[g] += prev.slice;
        continue;
      }
      ZeroBucket b;
      b.group = group;
      b.begin = begin;
      b.end = end;
      b.slice = (end - begin + ranks_[g] - 1) / ranks_[g];
      b.shard_offset = shard_size_[g];
      b.chunk = chunk;
      b.layers = std::move(layers);
      b.embedding_table = table;
      shard_size_[g] += b.slice;
      for (int layer : b.layers) buckets_of_layer_[layer + 1].push_back(static_cast<int>(buckets_.size()));
      buckets_.push_back(std::move(b));
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

size_t ZeroLayout::largest_bucket(ParamGroup g) const {
  size_t most = 0;
  for (const ZeroBucket& b : buckets_)
    if (b.group == g) most = std::max(most, b.numel());
  return most;
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
