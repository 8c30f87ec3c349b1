#include "model/param_store.h"

#include "backend/cpu_backend.h"

#include <cstring>

#include "core/rng.h"

namespace moe4d {

int64_t ParamInfo::global_start(int dim) const {
  for (const ShardSpec& s : shards)
    if (s.dim == dim) return static_cast<int64_t>(s.index) * (global_shape[dim] / s.parts);
  return 0;
}

int ParamStore::add(ParamInfo info) {
  MOE4D_CHECK(!finalized_);
  MOE4D_CHECK_MSG(find(info.name) < 0, "duplicate parameter {}", info.name);
  info.local_shape = info.global_shape;
  for (const ShardSpec& s : info.shards) {
    MOE4D_CHECK(s.dim >= 0 && s.dim < info.global_shape.ndim());
    MOE4D_CHECK_MSG(info.global_shape[s.dim] % s.parts == 0, "{}: dim {} of {} not divisible by {}", info.name, s.dim,
                    info.global_shape.str(), s.parts);
    MOE4D_CHECK(s.index >= 0 && s.index < s.parts);
    info.local_shape[s.dim] = info.global_shape[s.dim] / s.parts;
  }
  size_t& end = flat_size_[static_cast<int>(info.group)];
  // Keep every parameter 16-float aligned (64 bytes) inside the flat buffer.
  end = (end + 15) / 16 * 16;
  info.offset = end;
  end += static_cast<size_t>(info.local_shape.numel());
  params_.push_back(std::move(info));
  return size() - 1;
}

void ParamStore::finalize() {
  MOE4D_CHECK(!finalized_);
  for (int g = 0; g < kNumParamGroups; ++g) {
    flat_size_[g] = (flat_size_[g] + 15) / 16 * 16;
    values_[g] = Buffer(flat_size_[g] * sizeof(float));
    grads_[g] = Buffer(flat_size_[g] * sizeof(float));
  }
  finalized_ = true;
}

int ParamStore::find(const std::string& name) const {
  for (int i = 0; i < size(); ++i)
    if (params_[i].name == name) return i;
  return -1;
}

void ParamStore::init_values(uint64_t seed) {
  MOE4D_CHECK(finalized_);
  for (int id = 0; id < size(); ++id) {
    const ParamInfo& p = params_[id];
    float* v = value(id);
    switch (p.init) {
      case ParamInit::kOnes:
        for (int64_t i = 0; i < p.numel(); ++i) v[i] = 1.0f;
        break;
      case ParamInit::kZeros:  // initialisation writes host memory, like the loops of the other cases
        std::memset(v, 0, sizeof(float) * p.numel());
        break;
      case ParamInit::kNormal: {
        const uint64_t key = hash_combine(seed, hash_string(p.name));
        const float std = p.init_std;
        for_each_shard_element(p, [&](int64_t local, int64_t global) { v[local] = std * normal_at(key, global); });
        break;
      }
    }
  }
}

void ParamStore::zero_grads() { zero_grads(thread_cpu_backend()); }

void ParamStore::zero_grads(Backend& backend) {
  for (int g = 0; g < kNumParamGroups; ++g)  // an empty group (no experts on this stage) has no buffer
    if (flat_size_[g] > 0) backend.zero(grads_[g].data(), flat_size_[g] * sizeof(float));
}

}  // namespace moe4d
