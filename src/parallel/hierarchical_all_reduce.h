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
// Several all-reduces may be in flight at once (gradient buckets). MPI wants the collectives of a
// communicator started in the same order on every member, so each stage has its own communicator
// (intra-node reduce-scatter, inter-node all-reduce, intra-node all-gather) and an operation starts
// its next stage only after every earlier operation has started it: the launch order on each
// communicator is the call order of all_reduce_async, whatever order the stages complete in.
//
// Contract: the constructor is collective over `group` (it splits off the stage communicators
// once); `group` must outlive this object and every Work must end before it. Results equal the flat
// all-reduce up to floating-point summation order. Stages advance inside test()/wait() of any of
// this object's Works, on the calling thread; wait() completes the earlier operations first.
// Thread safety: as Communicator.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "comm/communicator.h"

namespace moe4d {

class HierarchicalWork;

class HierarchicalAllReduce {
 public:
  HierarchicalAllReduce(Communicator& group, int ranks_per_node);
  ~HierarchicalAllReduce();

  bool is_hierarchical() const { return intra_ != nullptr; }
  int ranks_per_node_in_group() const { return intra_ ? intra_->size() : 1; }
  Communicator& group() { return group_; }
  const Communicator& group() const { return group_; }
  Communicator* intra_node() { return intra_.get(); }  // reduce-scatter stage; null when flat
  Communicator* inter_node() { return inter_.get(); }  // null when flat
  // The stage communicators (intra-node reduce-scatter, inter-node, intra-node all-gather); empty when flat.
  std::vector<Communicator*> stage_communicators();

  // In place: data[count] = reduce over the group of data[count]; `data` must stay alive and
  // untouched until the Work completes.
  std::unique_ptr<Work> all_reduce_async(void* data, size_t count, DType dtype, ReduceOp op = ReduceOp::kSum);
  void all_reduce(void* data, size_t count, DType dtype, ReduceOp op = ReduceOp::kSum) {
    all_reduce_async(data, count, dtype, op)->wait();
  }

 private:
  friend class HierarchicalWork;
  // Advances the live operations in call order, up to and including `last`; block: wait for each
  // stage instead of testing it.
  void progress(const HierarchicalWork* last, bool block);

  Communicator& group_;
  std::unique_ptr<Communicator> intra_;
  std::unique_ptr<Communicator> inter_;
  std::unique_ptr<Communicator> intra_gather_;
  std::vector<HierarchicalWork*> live_;  // operations not yet complete, in call order
};

}  // namespace moe4d
