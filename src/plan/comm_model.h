// plan/comm_model.h — alpha-beta cost of collectives on the cluster's link tiers.
//
// Per collective over n ranks with `bytes` the full buffer (all-to-all: one rank's send buffer),
// alpha the per-step latency and B the per-device bandwidth (NCCL tuning.cc style):
//   ring all-reduce            2 (n-1) alpha + 2 (n-1)/n * bytes / B
//   reduce-scatter, all-gather   (n-1) alpha +   (n-1)/n * bytes / B
//   all-to-all                   (n-1) alpha +   (n-1)/n * bytes / B
//   send/recv                          alpha +             bytes / B
//   hierarchical all-reduce    reduce-scatter inside each node (g ranks) + all-reduce of bytes/g
//                              across the nodes + all-gather inside each node
// A group inside one node uses the intra-node link: a full mesh gives a group of n devices n-1
// links (B = link bandwidth * (n-1)), a switch a constant B per device. A group spanning nodes is
// bound by each device's NIC: all-reduce takes the better of a flat ring over the NICs and the
// hierarchical form; reduce-scatter/all-gather likewise (two-level); an all-to-all sends (g-1)/n of
// its buffer over the intra-node link and (n-g)/n over the NIC at the same time. Measured tables in
// the cluster (moe4d bench) replace the link formulas for the tiers and collectives they cover: each
// measured group size contributes its size regime for the buffer (CollectiveSample::min_bytes), and
// latency and bus bandwidth are interpolated linearly in n. Pure functions.
#pragma once

#include "plan/cluster_spec.h"

namespace moe4d {

// The worst group of one parallel dimension: n ranks over `nodes` nodes, at least `per_node` ranks
// on each of them.
struct GroupSpan {
  int size = 1;
  int nodes = 1;
  int per_node = 1;
  bool crosses_nodes() const { return nodes > 1; }
};

double ring_all_reduce_seconds(int n, double bytes, double latency, double bandwidth);
double ring_gather_seconds(int n, double bytes, double latency, double bandwidth);  // reduce-scatter or all-gather
double all_to_all_seconds(int n, double bytes, double latency, double bandwidth);
double send_recv_seconds(double bytes, double latency, double bandwidth);

// Per-device intra-node bandwidth of a group of n devices (full mesh: n-1 links; switch: constant).
double intra_node_bandwidth(const ClusterSpec& cluster, int n);

// nccl-tests bus factor: bytes on the wire per device per byte of buffer.
double bus_factor(Collective collective, int n);

// A latency-bound all-reduce of a few bytes over `ranks` ranks packed on nodes (the gradient norm,
// the loss): NCCL runs it as a tree (LL protocol), 2 ceil(log2 nodes) inter-node steps plus
// 2 ceil(log2 per_node) intra-node steps.
double scalar_all_reduce_seconds(const ClusterSpec& cluster, int ranks);

// Expected slowest of `ranks` devices whose speeds vary with relative sd `sigma`: 1 + sigma sqrt(2 ln N).
double straggler_factor(double sigma, int ranks);

// Time of `collective` over `group` moving `bytes`; 0 for a group of one rank.
double collective_seconds(const ClusterSpec& cluster, Collective collective, const GroupSpan& group, double bytes);

// The nodes one token's top_k routed picks reach when the EP group spans `ep_nodes` nodes and the
// experts' num_groups groups lie in order over them (expert e on EP rank e / (E / ep), so with
// num_groups a multiple of ep_nodes each node holds whole groups: DeepSeek-V3's node-limited
// routing when num_groups = ep_nodes). Group-limited routing (group_topk of num_groups) lets a
// token reach at most `most` nodes (group_topk, or group_topk x the nodes a group spans); `remote`
// is the expected number of nodes other than the token's own, with the picks spread uniformly over
// the experts it may use — what a dispatch that sends a token once per destination node (DeepEP,
// hierarchical dispatch) moves over the NICs per token, in token rows. Without groups:
// (N - 1)(1 - (1 - 1/N)^k). A per-slot all-to-all moves (N - 1) / N of the k picks off-node
// either way. Groups not aligned with nodes are counted as without a limit.
struct RoutedNodes {
  int most = 1;
  double remote = 0;
};
RoutedNodes routed_nodes_per_token(int top_k, int num_groups, int group_topk, int ep_nodes);

// The node-aware expert dispatch (moe.dispatcher: hierarchical, docs/moe.md §10) sends a token across
// nodes once per destination node that holds at least one of its k picks. With the picks uniform
// over E experts spread evenly over `nodes` nodes (E / nodes each), a given other node is missed by
// all k picks with probability C(E - E/nodes, k) / C(E, k) (k distinct experts drawn from the
// E - E/nodes elsewhere), so the expected number of other nodes a token reaches is
//   (nodes - 1) * (1 - C(E - E/nodes, k) / C(E, k)),
// against k (nodes - 1) / nodes routed copies to other nodes for the flat all-to-all. 0 for one node.
double expected_remote_nodes(int experts, int top_k, int nodes);

// Bytes that cross nodes per (token, other node) pair in one micro-batch's forward + backward of the
// node-aware exchange: four rows of `hidden` values of `value_bytes` each (the token out, its partial
// sum back; the output gradient out, the input gradient back) and 3 k four-byte values (the picks'
// slots and weights out, the weight gradients back). The flat exchange moves 4 rows per routed copy.
double hierarchical_pair_bytes(int hidden, int top_k, double value_bytes);

}  // namespace moe4d
