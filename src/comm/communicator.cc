// comm/communicator.cc — the backend-independent parts of the Communicator contract: operation
// names and statistics arithmetic.
#include "comm/communicator.h"

namespace moe4d {

const char* comm_op_name(CommOp op) {
  switch (op) {
    case CommOp::kAllReduce: return "all_reduce";
    case CommOp::kReduceScatter: return "reduce_scatter";
    case CommOp::kAllGather: return "all_gather";
    case CommOp::kAllToAllV: return "all_to_all_v";
    case CommOp::kBroadcast: return "broadcast";
    case CommOp::kSendRecv: return "send_recv";
    case CommOp::kBarrier: return "barrier";
    case CommOp::kCount: break;
  }
  return "?";
}

void CommStats::add(const CommStats& other) {
  for (int i = 0; i < static_cast<int>(CommOp::kCount); ++i) {
    ops[i].calls += other.ops[i].calls;
    ops[i].bytes += other.ops[i].bytes;
    ops[i].bytes_intra_node += other.ops[i].bytes_intra_node;
    ops[i].bytes_inter_node += other.ops[i].bytes_inter_node;
    ops[i].busy_seconds += other.ops[i].busy_seconds;
    ops[i].exposed_seconds += other.ops[i].exposed_seconds;
  }
}

}  // namespace moe4d
