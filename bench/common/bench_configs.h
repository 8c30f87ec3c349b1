// bench/common/bench_configs.h — the "tiny" and "small" MoE configs of the benchmarks (issue 2),
// trained on a synthetic token shard so the benchmarks need no prepared corpus.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/rng.h"
#include "data/token_shard_writer.h"

namespace moe4d::bench {

// tiny: d=256, 4 layers, 8 heads, ffn 688, 8 experts top-2, vocab 4096, seq 256, batch 8.
// small: the same with d=512, ffn 1376.
inline Config bench_config(const std::string& name, const std::string& shard) {
  Config c;
  c.source = name;
  const bool small = name == "small";
  c.model.vocab_size = 4096;
  c.model.hidden_size = small ? 512 : 256;
  c.model.num_layers = 4;
  c.model.num_heads = 8;
  c.model.ffn_hidden_size = small ? 1376 : 688;
  c.model.seq_length = 256;
  c.model.moe.num_experts = 8;
  c.model.moe.top_k = 2;
  c.train.global_batch_size = 8;
  c.train.steps = 1000;
  c.data.train = shard;
  return c;
}

// 400k uniformly random ids of a 4096 vocabulary.
inline std::string write_bench_shard(const std::string& path) {
  std::vector<int> ids(400000);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int(mix64(i) % 4096);
  write_token_shard(path, ids, 4096, "bytes", 1);
  return path;
}

// `tokens` Zipf-distributed ids of a `vocab` vocabulary (id v with weight 1 / (v + 1)), the same
// content on every call: ranks may each write their own copy.
inline std::string write_zipf_shard(const std::string& path, int vocab, int tokens) {
  std::mt19937 gen(7);
  std::vector<double> weights(vocab);
  for (int v = 0; v < vocab; ++v) weights[v] = 1.0 / (v + 1);
  std::discrete_distribution<int> zipf(weights.begin(), weights.end());
  std::vector<int> ids(tokens);
  for (int& id : ids) id = zipf(gen);
  write_token_shard(path, ids, vocab, "bytes", 1);
  return path;
}

}  // namespace moe4d::bench
