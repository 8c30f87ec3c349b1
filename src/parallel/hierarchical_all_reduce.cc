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

// The three stages of one hierarchical all-reduce: stage_ 0 reduce-scatter, 1 all-reduce, 2
// all-gather in flight, 3 done. HierarchicalAllReduce::progress starts the next stage.
class HierarchicalWork final : public Work {
 public:
  HierarchicalWork(HierarchicalAllReduce& owner, void* data, size_t count, DType dtype, ReduceOp op)
      : owner_(owner), data_(data), count_(count), dtype_(dtype), op_(op) {
    const size_t local = static_cast<size_t>(owner_.intra_->size());
    shard_count_ = (count_ + local - 1) / local;
    const size_t esize = dtype_size(dtype_);
    shard_ = Buffer(std::max<size_t>(shard_count_ * esize, 1));
    padded_ = shard_count_ * local != count_;
    if (padded_) {
      // Reduce-scatter needs equal blocks: pad to a multiple of the local size. Padding only
      // meets padding, so its (zero) values never reach the result.
      scratch_ = Buffer(shard_count_ * local * esize);
      std::memcpy(scratch_.data(), data_, count_ * esize);
    }
    current_ = owner_.intra_->reduce_scatter_async(full(), shard_.data(), shard_count_, dtype_, op_);
    owner_.live_.push_back(this);
  }
  ~HierarchicalWork() override { wait(); }

  bool test() override {
    owner_.progress(this, false);
    return done();
  }
  void wait() override {
    if (!done()) owner_.progress(this, true);
  }

  bool done() const { return stage_ == 3; }
  int stage() const { return stage_; }
  // Completes the stage in flight (block) or checks it; false if it is still running.
  bool finish_stage(bool block) {
    if (block) {
      current_->wait();
      return true;
    }
    return current_->test();
  }
  // After finish_stage: start the next stage, or finish.
  void advance() {
    ++stage_;
    if (stage_ == 1) {
      current_ = owner_.inter_->all_reduce_async(shard_.data(), shard_count_, dtype_, op_);
    } else if (stage_ == 2) {
      current_ = owner_.intra_gather_->all_gather_async(shard_.data(), full(), shard_count_, dtype_);
    } else {
      current_.reset();
      if (padded_) std::memcpy(data_, scratch_.data(), count_ * dtype_size(dtype_));
    }
  }

 private:
  void* full() { return padded_ ? scratch_.data() : data_; }

  HierarchicalAllReduce& owner_;
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

void HierarchicalAllReduce::progress(const HierarchicalWork* last, bool block) {
  int earliest = 3;  // lowest stage among the operations before the current one
  for (HierarchicalWork* w : live_) {
    // Stage k + 1 may start only once every earlier operation has started it (stage >= k + 1).
    while (!w->done() && (w->stage() == 2 || earliest > w->stage()) && w->finish_stage(block)) w->advance();
    earliest = std::min(earliest, w->stage());
    if (w == last) break;
  }
  std::erase_if(live_, [](const HierarchicalWork* w) { return w->done(); });
}

HierarchicalAllReduce::~HierarchicalAllReduce() { MOE4D_CHECK_MSG(live_.empty(), "hierarchical all-reduce still in flight"); }

std::vector<Communicator*> HierarchicalAllReduce::stage_communicators() {
  if (!is_hierarchical()) return {};
  return {intra_.get(), inter_.get(), intra_gather_.get()};
}

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
  intra_gather_ = group.split(node_index, local_index, group.name() + ".intra_node_gather");
  MOE4D_CHECK_EQ(intra_->size(), static_cast<int>(per_node));
  MOE4D_CHECK_EQ(inter_->size(), static_cast<int>(by_node.size()));
}

std::unique_ptr<Work> HierarchicalAllReduce::all_reduce_async(void* data, size_t count, DType dtype, ReduceOp op) {
  if (!is_hierarchical()) return group_.all_reduce_async(data, count, dtype, op);
  return std::make_unique<HierarchicalWork>(*this, data, count, dtype, op);
}

}  // namespace moe4d
