// bench/moe/dispatch_bytes_bench.cc — inter-node bytes of one micro-batch's expert exchange (forward +
// backward moves), flat all-to-all vs the node-aware dispatch (moe.dispatcher: hierarchical), against
// the planner's prediction. Prints one JSON document.
//
// usage (one command line):
//   mpirun -np 8 --host 127.0.0.2:4,127.0.0.3:4 --mca plm_rsh_agent tests/launch/fake_rsh.sh
//          --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo
//          build/bench/moe/dispatch_bytes_bench [--tokens=512] [--hidden=64]
//   (2 fake nodes x 4 ranks; on real nodes just mpirun across them). Every rank is one EP rank; the
//   nodes are the hosts MPI reports. Routing: uniform top-k (bench/moe/dispatch_bytes.h), for top-2 and
//   top-8 of 16 and 64 experts. Bytes are summed over the ranks; `planned` is tokens x ranks x
//   expected_remote_nodes x hierarchical_pair_bytes (plan/comm_model.h).
#include <mpi.h>

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "../common/bench_args.h"
#include "comm/mpi/mpi_communicator.h"
#include "comm/mpi/mpi_runtime.h"
#include "dispatch_bytes.h"
#include "model/expert_replicas.h"
#include "parallel/parallel_context.h"
#include "plan/comm_model.h"

int main(int argc, char** argv) {
  using namespace moe4d;
  MpiRuntime runtime(&argc, &argv);
  int tokens = 512, hidden = 64;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (const char* v = bench::flag_value(arg, "--tokens=")) tokens = std::max(1, std::atoi(v));
    else if (const char* v = bench::flag_value(arg, "--hidden=")) hidden = std::max(1, std::atoi(v));
    else {
      std::fprintf(stderr, "dispatch_bytes_bench: unknown argument '%s' (expected --tokens=, --hidden=)\n", arg.c_str());
      return 2;
    }
  }
  auto world = MpiCommunicator::world();
  ParallelConfig par;
  par.expert_parallel = world->size();
  auto pc = make_parallel_context(std::move(world), par, 0);
  const int ep = pc->ep_size();
  if (16 % ep != 0) {
    if (pc->rank == 0) std::fprintf(stderr, "dispatch_bytes_bench: needs 2, 4, 8 or 16 ranks, got %d\n", ep);
    return 2;
  }
  const std::vector<int> rank_node = ep_rank_nodes(*pc);
  const int nodes = *std::max_element(rank_node.begin(), rank_node.end()) + 1;
  nlohmann::json cases = nlohmann::json::array();
  for (const int experts : {16, 64}) {
    for (const int k : {2, 8}) {
      const double t0 = MPI_Wtime();
      const bench::DispatchBytes b = bench::measure_dispatch_bytes(*pc->ep, rank_node, experts, k, tokens, hidden, 2028);
      const double seconds = MPI_Wtime() - t0;
      double sums[4] = {double(b.flat_inter), double(b.hier_inter), double(b.remote_pairs), double(b.remote_copies)};
      pc->ep->all_reduce(sums, 4, DType::kF64);
      const double pair = hierarchical_pair_bytes(hidden, k, sizeof(float));
      const double planned = double(tokens) * ep * expected_remote_nodes(experts, k, nodes) * pair;
      cases.push_back({{"experts", experts},
                       {"top_k", k},
                       {"inter_node_bytes", {{"alltoall", sums[0]}, {"hierarchical", sums[1]}}},
                       {"ratio", sums[0] > 0 ? sums[1] / sums[0] : 0.0},
                       {"remote_token_node_pairs", sums[2]},
                       {"remote_routed_copies", sums[3]},
                       {"from_routing", sums[2] * pair},
                       {"planned", planned},
                       {"hierarchical_over_planned", planned > 0 ? sums[1] / planned : 0.0},
                       {"forward_output_rel_diff", b.max_diff},
                       {"seconds", seconds}});
    }
  }
  if (pc->rank == 0) {
    const nlohmann::json result = {{"benchmark", "dispatch_bytes_bench"}, {"ep", ep},
                                   {"nodes", nodes},                      {"tokens_per_rank", tokens},
                                   {"hidden", hidden},                    {"moves", "forward + backward, one micro-batch"},
                                   {"cases", cases}};
    std::printf("%s\n", result.dump(2).c_str());
  }
  return 0;
}
