// model/expert_replicas.cc — replica weight fetch, row split over copies, gradient return (see the
// header for the contract and the byte counts).
#include "model/expert_replicas.h"

#include <algorithm>
#include <cstring>

#include "backend/backend.h"
#include "core/check.h"
#include "model/param_store.h"

namespace moe4d {

ExpertReplicas::ExpertReplicas(Communicator& ep_group, ExpertPlacement placement, ReplicaWeights weights,
                               std::vector<int> rank_node)
    : group_(ep_group),
      placement_(std::move(placement)),
      w_(weights),
      me_(ep_group.rank()),
      ep_(ep_group.size()),
      block_floats_(size_t(3) * weights.hidden * weights.local_ffn),
      rank_node_(std::move(rank_node)),
      dispatch_(placement_, rank_node_) {
  MOE4D_CHECK_EQ(placement_.ep, ep_);
  const size_t free_slots = size_t(placement_.redundant / ep_);
  values_.assign(free_slots * block_floats_, 0.0f);
  grads_.assign(free_slots * block_floats_, 0.0f);
  layout();
}

void ExpertReplicas::set_placement(ExpertPlacement placement) {
  MOE4D_CHECK(fetching_ == nullptr && returning_ == nullptr);
  MOE4D_CHECK(placement.experts == placement_.experts && placement.ep == ep_ &&
              placement.redundant == placement_.redundant);
  placement_ = std::move(placement);
  layout();
  dispatch_ = ExpertDispatch(placement_, rank_node_);
  fresh_ = false;  // other experts in the moved slots
}

void ExpertReplicas::layout() {
  const int home = placement_.home_slots(), free_slots = placement_.redundant / ep_;
  copy_index_.assign(placement_.slots(), 0);
  std::vector<int> seen(placement_.experts, 0);
  for (int p = 0; p < placement_.slots(); ++p) copy_index_[p] = seen[placement_.slot_expert[p]]++;

  // Receive side: my replica slots grouped by the home rank of their expert, then in slot order.
  recv_counts_.assign(ep_, 0);
  recv_displs_.assign(ep_, 0);
  position_.assign(free_slots, -1);
  int next = 0;
  for (int h = 0; h < ep_; ++h) {
    recv_displs_[h] = size_t(next) * block_floats_;
    for (int j = 0; j < free_slots; ++j)
      if (placement_.home_rank(expert_of(home + j)) == h) {
        position_[j] = next++;
        recv_counts_[h] += block_floats_;
      }
  }
  // Send side: for each peer in order, its replica slots (in its slot order) whose home is me.
  send_counts_.assign(ep_, 0);
  send_displs_.assign(ep_, 0);
  send_experts_.clear();
  for (int r = 0; r < ep_; ++r) {
    send_displs_[r] = send_experts_.size() * block_floats_;
    for (int j = 0; j < free_slots; ++j) {
      const int e = placement_.expert_at(r, home + j);
      if (placement_.home_rank(e) != me_) continue;
      send_experts_.push_back(e - me_ * home);
      send_counts_[r] += block_floats_;
    }
  }
  send_.assign(send_experts_.size() * block_floats_, 0.0f);
  home_grads_.assign(send_experts_.size() * block_floats_, 0.0f);
}

const float* ExpertReplicas::weight(int local_slot, int which) const {
  const size_t part = block_floats_ / 3;
  return values_.data() + size_t(position_[local_slot - placement_.home_slots()]) * block_floats_ + which * part;
}

float* ExpertReplicas::grad(int local_slot, int which) {
  const size_t part = block_floats_ / 3;
  return grads_.data() + size_t(position_[local_slot - placement_.home_slots()]) * block_floats_ + which * part;
}

void ExpertReplicas::split_rows(const int* logical_offsets, int* row_slot, int* slot_row, int slots_total,
                                int* physical_offsets, Arena& scratch) const {
  const int S = placement_.slots(), E = placement_.experts, rows = logical_offsets[E];
  // Each expert's rows [begin, end) for each of its copies, in the copies' slot order.
  std::vector<std::vector<int>> ranges(E);
  for (int e = 0; e < E; ++e)
    dispatch_.split(e, me_, logical_offsets[e + 1] - logical_offsets[e], ranges[e]);
  int* perm = scratch.alloc_i32(std::max(rows, 1));  // old row -> new row
  int at = 0;
  for (int p = 0; p < S; ++p) {
    const int e = placement_.slot_expert[p];
    const int begin = logical_offsets[e] + ranges[e][2 * size_t(copy_index_[p])];
    const int end = logical_offsets[e] + ranges[e][2 * size_t(copy_index_[p]) + 1];
    physical_offsets[p] = at;
    for (int old = begin; old < end; ++old) perm[old] = at++;
  }
  physical_offsets[S] = at;
  MOE4D_CHECK_EQ(at, rows);
  int* old_row_slot = scratch.alloc_i32(std::max(rows, 1));
  std::memcpy(old_row_slot, row_slot, sizeof(int) * size_t(rows));  // host bookkeeping: the routing plan
  for (int old = 0; old < rows; ++old) row_slot[perm[old]] = old_row_slot[old];
  for (int slot = 0; slot < slots_total; ++slot)
    if (slot_row[slot] >= 0) slot_row[slot] = perm[slot_row[slot]];
}

void ExpertReplicas::fetch_begin(const ParamStore& params, Backend& backend) {
  const size_t df = size_t(w_.hidden) * w_.local_ffn;
  const float* src[3] = {params.value(w_.w1_id), params.value(w_.w3_id), params.value(w_.w2_id)};
  for (size_t i = 0; i < send_experts_.size(); ++i)
    for (int which = 0; which < 3; ++which)
      backend.copy(send_.data() + i * block_floats_ + which * df, src[which] + size_t(send_experts_[i]) * df,
                   sizeof(float) * df);
  fetching_ = group_.all_to_all_v_async(send_.data(), send_counts_.data(), send_displs_.data(), values_.data(),
                                        recv_counts_.data(), recv_displs_.data(), DType::kF32);
  moved_floats_ += values_.size();
}

void ExpertReplicas::invalidate() {
  if (fetching_) {  // a fetch nobody waited for (a pass that stopped early): finish it, then drop it
    fetching_->wait();
    fetching_.reset();
  }
  fresh_ = false;
}

void ExpertReplicas::prefetch(const ParamStore& params, Backend& backend) {
  if (!fresh_ && !fetching_) fetch_begin(params, backend);
}

void ExpertReplicas::weights_ready(const ParamStore& params, Backend& backend) {
  prefetch(params, backend);
  if (!fetching_) return;
  fetching_->wait();
  fetching_.reset();
  fresh_ = true;
}

void ExpertReplicas::return_grads_begin() {
  MOE4D_CHECK(returning_ == nullptr);
  // The fetch reversed: my replica gradients (grouped by home) go to the homes.
  returning_ = group_.all_to_all_v_async(grads_.data(), recv_counts_.data(), recv_displs_.data(), home_grads_.data(),
                                         send_counts_.data(), send_displs_.data(), DType::kF32);
  moved_floats_ += grads_.size();
}

void ExpertReplicas::return_grads_finish(ParamStore& params, Backend& backend) {
  MOE4D_CHECK(returning_ != nullptr);
  returning_->wait();
  returning_.reset();
  backend.fill(grads_.data(), 0.0f, int64_t(grads_.size()));  // the next micro-batches accumulate afresh
  const size_t df = size_t(w_.hidden) * w_.local_ffn;
  float* dst[3] = {params.grad(w_.w1_id), params.grad(w_.w3_id), params.grad(w_.w2_id)};
  // In peer order, so that the sum over the copies is formed in the same order on every run.
  for (size_t i = 0; i < send_experts_.size(); ++i)
    for (int which = 0; which < 3; ++which) {
      float* g = dst[which] + size_t(send_experts_[i]) * df;
      backend.axpy(g, home_grads_.data() + i * block_floats_ + which * df, 1.0f, int64_t(df));
    }
}

std::pair<double, double> ExpertReplicas::cross_node_rows(const int* slot_counts) const {
  const int S = placement_.slots();
  const auto node = [&](int rank) { return rank_node_.empty() ? 0 : rank_node_[rank]; };
  double with = 0, without = 0;
  for (int src = 0; src < ep_; ++src)
    for (int p = 0; p < S; ++p) {
      const double n = slot_counts[size_t(src) * S + p];
      if (node(placement_.rank_of_slot(p)) != node(src)) with += n;
      if (node(placement_.home_rank(placement_.slot_expert[p])) != node(src)) without += n;
    }
  return {with, without};
}

void ExpertReplicas::rank_rows(const int* slot_counts, std::vector<double>& with, std::vector<double>& without) const {
  const int S = placement_.slots();
  with.assign(ep_, 0.0);
  without.assign(ep_, 0.0);
  for (int src = 0; src < ep_; ++src)
    for (int p = 0; p < S; ++p) {
      const double n = slot_counts[size_t(src) * S + p];
      with[placement_.rank_of_slot(p)] += n;
      without[placement_.home_rank(placement_.slot_expert[p])] += n;
    }
}

}  // namespace moe4d

namespace moe4d {

std::vector<int> ep_rank_nodes(const ParallelContext& pc) {
  std::vector<int> nodes;
  for (int rank : pc.grid.group(pc.rank, {ParallelDim::kEP}))
    nodes.push_back(pc.ranks_per_node > 0 ? RankGrid::node_of(rank, pc.ranks_per_node) : 0);
  return nodes;
}

}  // namespace moe4d
