// model/param_store.h — every parameter this rank holds, as shards of named global tensors.
//
// A parameter is a global tensor (its name and shape are the same in every parallel layout, and
// are what checkpoints store) of which this rank holds one block: each ShardSpec splits one dimension
// into `parts` equal pieces and keeps piece `index` (TP splits a weight's row or column dimension,
// EP splits the expert dimension). Values and gradients of all parameters live in two flat buffers
// per ParamGroup, in registration order (forward order), so gradient buckets, sharded optimizers and
// norms work on contiguous ranges.
//
// Initialisation is a pure function of (seed, name, global element index) (core/rng.h), so every
// layout materialises exactly the same initial model and a rank generates only its own shard.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace moe4d {

class Backend;

struct ShardSpec {
  int dim = 0;
  int parts = 1;
  int index = 0;
};

// Which replicas must agree on a parameter, i.e. over which group its gradient is summed:
// dense parameters are replicated over DP x EP, expert parameters over DP only (docs/model.md §2).
enum class ParamGroup { kDense = 0, kExpert = 1 };
constexpr int kNumParamGroups = 2;

enum class ParamInit { kNormal, kOnes, kZeros };

struct ParamInfo {
  std::string name;
  Shape global_shape;
  std::vector<ShardSpec> shards;  // at most one per dimension
  ParamGroup group = ParamGroup::kDense;
  ParamInit init = ParamInit::kNormal;
  float init_std = 0.02f;
  bool weight_decay = true;     // false for norms
  bool tp_replicated = false;   // every TP rank holds the same values (norms, router)
  int layer = -1;               // transformer layer; -1 embedding, num_layers final norm and head
  bool is_tied_copy = false;    // last-stage copy of a tied embedding (counted once in norms/checkpoints)

  // Filled by ParamStore::add.
  Shape local_shape;
  size_t offset = 0;  // element offset in the group's flat buffers
  int64_t numel() const { return local_shape.numel(); }
  // Start of this shard along each dimension of the global tensor.
  int64_t global_start(int dim) const;
};

class ParamStore {
 public:
  ParamStore() = default;
  ParamStore(const ParamStore&) = delete;
  ParamStore& operator=(const ParamStore&) = delete;

  // Registration (before finalize). Returns the parameter id.
  int add(ParamInfo info);
  // Allocates the flat value and gradient buffers (zeroed).
  void finalize();
  bool finalized() const { return finalized_; }

  int size() const { return static_cast<int>(params_.size()); }
  const ParamInfo& info(int id) const { return params_[id]; }
  const std::vector<ParamInfo>& infos() const { return params_; }
  int find(const std::string& name) const;  // -1 if absent

  float* value(int id) { return values_[group_index(id)].f32() + params_[id].offset; }
  const float* value(int id) const { return values_[group_index(id)].f32() + params_[id].offset; }
  float* grad(int id) { return grads_[group_index(id)].f32() + params_[id].offset; }
  const float* grad(int id) const { return grads_[group_index(id)].f32() + params_[id].offset; }
  Tensor value_tensor(int id) { return Tensor::f32(value(id), params_[id].local_shape); }

  float* flat_values(ParamGroup g) { return values_[static_cast<int>(g)].f32(); }
  float* flat_grads(ParamGroup g) { return grads_[static_cast<int>(g)].f32(); }
  size_t flat_size(ParamGroup g) const { return flat_size_[static_cast<int>(g)]; }
  size_t total_numel() const { return flat_size_[0] + flat_size_[1]; }

  // Fills every parameter from the counter-based generator keyed by (seed, name).
  void init_values(uint64_t seed);
  // Zeroes every gradient on `backend` (this thread's CPU backend without one).
  void zero_grads();
  void zero_grads(Backend& backend);
  // The device the values and gradients live on.
  Device device() const { return values_[0].device(); }

 private:
  int group_index(int id) const { return static_cast<int>(params_[id].group); }
  std::vector<ParamInfo> params_;
  Buffer values_[kNumParamGroups];
  Buffer grads_[kNumParamGroups];
  size_t flat_size_[kNumParamGroups] = {0, 0};
  bool finalized_ = false;
};

// Visits the global flat index of every element of a shard, in local row-major order.
// fn(local_index, global_index).
template <typename Fn>
void for_each_shard_element(const ParamInfo& info, Fn&& fn) {
  const int nd = info.global_shape.ndim();
  int64_t start[Shape::kMaxDims] = {0, 0, 0, 0};
  for (int d = 0; d < nd; ++d) start[d] = info.global_start(d);
  int64_t idx[Shape::kMaxDims] = {0, 0, 0, 0};
  const int64_t n = info.local_shape.numel();
  for (int64_t local = 0; local < n; ++local) {
    int64_t global = 0;
    for (int d = 0; d < nd; ++d) global = global * info.global_shape[d] + start[d] + idx[d];
    fn(local, global);
    for (int d = nd - 1; d >= 0; --d) {
      if (++idx[d] < info.local_shape[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace moe4d
