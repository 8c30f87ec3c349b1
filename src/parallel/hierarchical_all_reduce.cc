// parallel/hierarchical_all_reduce.cc — reduce-scatter / all-reduce / all-gather over nodes.
#include "parallel/hierarchical_all_reduce.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <vector>

#include "core/check.h"
#include "core/tensor.h"
#include "parallel/rank_grid.h"

namespace moe4d {
namespace {

// The three stages of one hierarchical all-reduce; each is started when the previous completes.
class HierarchicalWork final : public Work {
 public:
  HierarchicalWork(Communicator& intra, Communicator& inter, void* data, size_t count, DType dtype, ReduceOp op)
      : intra_(intra), inter_(inter), data_(data), count_(count), dtype_(dtype), op_(op) {
    size_t local = static_cast<size_t>(intra_.size());
    shard_count_ = (count_ + local - 1) / local;
    size_t esize = dtype_size(dtype_);
    shard_ = Buffer(std::max<size_t>(shard_count_ * esize, 1));
    padded_ = shard_count_ * local != count_;
    if (padded_) {
      // Reduce-scatter needs equal blocks: pad to a multiple of the local size. Padding only
      // meets padding, so its (zero) values never reach the result.
      scratch_ = Buffer(shard_count_ * local * esize);
      std::memcpy(scratch_.data(), data_, count_ * esize);
    }
    current_ = intra_.reduce_scatter_async(full(), shard_.data(), shard_count_, dtype_, op_);
  }
  ~HierarchicalWork() override { wait(); }

  bool test() override {
    while (current_ && current_->test()) advance();
    return current_ == nullptr;
  }
  void wait() override {
    while (current_) {
      current_->wait();
      advance();
    }
  }

 private:
  void* full() { return padded_ ? scratch_.data() : data_; }

  void advance() {
    ++stage_;
    if (stage_ == 1) {
      current_ = inter_.all_reduce_async(shard_.data(), shard_count_, dtype_, op_);
    } else if (stage_ == 2) {
      current_ = intra_.all_gather_async(shard_.data(), full(), shard_count_, dtype_);
    } else {
      current_.reset();
      if (padded_) std::memcpy(data_, scratch_.data(), count_ * dtype_size(dtype_));
    }
  }

  Communicator& intra_;
  Communicator& inter_;
  void* data_;
  size_t count_;
  DType dtype_;
  ReduceOp op_;
  size_t shard_count_ = 0;
  bool padded_ = false;
  Buffer shard_;
  Buffer scratch_;
  int stage_ = 0;
  std::unique_ptr<Work> current_;
};

}  // namespace

HierarchicalAllReduce::HierarchicalAllReduce(Communicator& group, int ranks_per_node) : group_(group) {
  MOE4D_CHECK_GT(ranks_per_node, 0);
  // Members per node, in group-rank order; every member computes the same from world_ranks().
  const std::vector<int>& members = group.world_ranks();
  std::map<int, std::vector<int>> by_node;  // node -> group ranks
  for (int r = 0; r < static_cast<int>(members.size()); ++r)
    by_node[RankGrid::node_of(members[r], ranks_per_node)].push_back(r);
  size_t per_node = by_node.begin()->second.size();
  bool uniform = true;
  for (const auto& [node, ranks] : by_node) uniform = uniform && ranks.size() == per_node;
  if (by_node.size() < 2 || per_node < 2 || !uniform) return;  // flat is as good or the only option

  int my_node = RankGrid::node_of(members[group.rank()], ranks_per_node);
  int node_index = static_cast<int>(std::distance(by_node.begin(), by_node.find(my_node)));
  const std::vector<int>& node_ranks = by_node[my_node];
  int local_index =
      static_cast<int>(std::find(node_ranks.begin(), node_ranks.end(), group.rank()) - node_ranks.begin());
  intra_ = group.split(node_index, local_index, group.name() + ".intra_node");
  inter_ = group.split(local_index, node_index, group.name() + ".inter_node");
  MOE4D_CHECK_EQ(intra_->size(), static_cast<int>(per_node));
  MOE4D_CHECK_EQ(inter_->size(), static_cast<int>(by_node.size()));
}

std::unique_ptr<Work> HierarchicalAllReduce::all_reduce_async(void* data, size_t count, DType dtype, ReduceOp op) {
  if (!is_hierarchical()) return group_.all_reduce_async(data, count, dtype, op);
  return std::make_unique<HierarchicalWork>(*intra_, *inter_, data, count, dtype, op);
}

}  // namespace moe4d
