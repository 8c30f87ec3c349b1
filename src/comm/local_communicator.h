// comm/local_communicator.h — the one-rank backend: lets the model, the trainer and their tests run
// without MPI.
//
// A LocalCommunicator is a group of size 1 (rank 0). Every collective reduces to a copy (or nothing):
// all_reduce and barrier are no-ops, reduce_scatter / all_gather / all_to_all_v copy this rank's block,
// broadcast requires root 0. Sending to or receiving from oneself has no partner and throws
// moe4d::Error naming the backend and the operation. split() returns another LocalCommunicator
// (nullptr for a negative color, MPI_UNDEFINED semantics). Work handles are complete on return.
// Thread safety: as Communicator (one issuing thread per instance).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace moe4d {

class LocalCommunicator : public Communicator {
 public:
  explicit LocalCommunicator(std::string name = "world", int world_rank = 0);

  int rank() const override { return 0; }
  int size() const override { return 1; }
  const std::vector<int>& world_ranks() const override { return world_ranks_; }
  const std::string& name() const override { return name_; }
  const char* backend() const override { return "local"; }

  std::unique_ptr<Work> all_reduce_async(void* data, size_t count, DType dtype, ReduceOp op) override;
  std::unique_ptr<Work> reduce_scatter_async(const void* send, void* recv, size_t recv_count, DType dtype,
                                             ReduceOp op) override;
  std::unique_ptr<Work> all_gather_async(const void* send, void* recv, size_t send_count, DType dtype) override;
  std::unique_ptr<Work> all_to_all_v_async(const void* send, const size_t* send_counts, const size_t* send_displs,
                                           void* recv, const size_t* recv_counts, const size_t* recv_displs,
                                           DType dtype) override;
  std::unique_ptr<Work> broadcast_async(void* data, size_t count, DType dtype, int root) override;
  std::unique_ptr<Work> send_async(const void* data, size_t count, DType dtype, int dst, int tag) override;
  std::unique_ptr<Work> recv_async(void* data, size_t count, DType dtype, int src, int tag) override;
  void barrier() override;

  std::unique_ptr<Communicator> split(int color, int key, const std::string& name) override;

 private:
  void count_call(CommOp op, size_t bytes);

  std::string name_;
  std::vector<int> world_ranks_;
};

}  // namespace moe4d
