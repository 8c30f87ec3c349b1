// tests/plan/plan_test_util.h — small models and clusters whose numbers can be checked by hand.
#pragma once

#include "config/config.h"
#include "plan/cluster_spec.h"
#include "plan/layout.h"
#include "plan/training_setup.h"

namespace moe4d::testing {

// V 32, d 8, 2 layers, 2 heads (head_dim 4), ffn 16, 4 experts top-2 on every second layer
// (layer 0 dense, layer 1 MoE), untied, dropless.
inline ModelConfig tiny_moe() {
  ModelConfig m;
  m.vocab_size = 32;
  m.hidden_size = 8;
  m.num_layers = 2;
  m.num_heads = 2;
  m.ffn_hidden_size = 16;
  m.seq_length = 4;
  m.moe.num_experts = 4;
  m.moe.top_k = 2;
  m.moe.layer_freq = 2;
  return m;
}

// Sequence 4 tokens, fp32, 4 gradient buckets, overlap on.
inline TrainingSetup tiny_setup(int64_t global_batch = 8) {
  TrainingSetup s;
  s.global_batch = global_batch;
  s.seq_length = 4;
  s.precision = Precision::kFP32;
  s.grad_buckets = 4;
  return s;
}

// 1 TFLOP/s at a flat 50% efficiency in every precision, 1e10 B/s memory, no reserve; a switch of
// 1e10 B/s (1 us) inside nodes of `per_node` devices and 1e9 B/s NICs (10 us) between them.
inline ClusterSpec flat_cluster(int nodes, int per_node, double memory_bytes = 1e12) {
  ClusterSpec c;
  c.name = "flat";
  c.nodes = nodes;
  c.devices_per_node = per_node;
  c.device.name = "flat";
  c.device.memory_bytes = memory_bytes;
  c.device.peak_flops = {1e12, 1e12, 1e12};
  c.device.memory_bandwidth = 1e10;
  for (auto& curve : c.device.gemm_efficiency) curve = {{1, 0.5}, {1e6, 0.5}};
  c.intra = {LinkKind::kSwitch, 1e10, 1e-6};
  c.inter = {1e9, 1e-5};
  c.memory_reserve_fraction = 0;
  return c;
}

inline Layout make_layout(int dp, int ep, int tp, int pp, int mbs, int mb) {
  Layout l;
  l.dp = dp;
  l.ep = ep;
  l.tp = tp;
  l.pp = pp;
  l.micro_batch_size = mbs;
  l.micro_batch_num = mb;
  return l;
}

}  // namespace moe4d::testing
