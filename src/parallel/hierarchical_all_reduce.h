// parallel/hierarchical_all_reduce.h — node-aware all-reduce for groups that span nodes.
//
// A flat all-reduce over a group that spans nodes pushes every byte through the slow inter-node
// network once per ring step. The hierarchical form does
//   1. reduce-scatter inside each node        (fast intra-node links; each local rank owns 1/L)
//   2. all-reduce of that shard across nodes  (only 1/L of the data crosses the network per rank)
//   3. all-gather inside each node
// which moves (L-1)/L of the traffic onto intra-node links. It is used when the group has the same
// number L > 1 of members on each of two or more nodes; otherwise (one node, one member per node,
// or uneven nodes) every call is the group's own flat all-reduce. Nodes hold `ranks_per_node`
// consecutive world ranks (RankGrid::node_of).
//
// Contract: the constructor is collective over `group` (it splits off the intra- and inter-node
// communicators once); `group` must outlive this object. Results equal the flat all-reduce up to
// floating-point summation order. all_reduce_async returns a Work whose stages advance inside
// test()/wait() on the calling thread. Thread safety: as Communicator.
#pragma once

#include <cstddef>
#include <memory>

#include "comm/communicator.h"

namespace moe4d {

class HierarchicalAllReduce {
 public:
  HierarchicalAllReduce(Communicator& group, int ranks_per_node);

  bool is_hierarchical() const { return intra_ != nullptr; }
  int ranks_per_node_in_group() const { return intra_ ? intra_->size() : 1; }
  Communicator& group() { return group_; }
  Communicator* intra_node() { return intra_.get(); }  // null when flat
  Communicator* inter_node() { return inter_.get(); }  // null when flat

  // In place: data[count] = reduce over the group of data[count]; `data` must stay alive and
  // untouched until the Work completes.
  std::unique_ptr<Work> all_reduce_async(void* data, size_t count, DType dtype, ReduceOp op = ReduceOp::kSum);
  void all_reduce(void* data, size_t count, DType dtype, ReduceOp op = ReduceOp::kSum) {
    all_reduce_async(data, count, dtype, op)->wait();
  }

 private:
  Communicator& group_;
  std::unique_ptr<Communicator> intra_;
  std::unique_ptr<Communicator> inter_;
};

}  // namespace moe4d
