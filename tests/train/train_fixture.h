// tests/train/train_fixture.h — a tiny MoE training setup on a synthetic token shard, shared by the
// trainer tests (single process) and the parallel-equivalence tests (under mpirun).
#pragma once

#include <random>
#include <string>
#include <vector>

#include "../common/temp_dir.h"
#include "config/config.h"
#include "data/token_shard_writer.h"

namespace moe4d::test {

// A shard of `tokens` ids drawn from a skewed (Zipf-like, repetitive) distribution, so that a model
// can actually learn something and losses move.
// no_repeats: no token follows itself (see tests/parallel_train/sequence_parallel_equivalence_test.cc).
inline std::string write_synthetic_shard(const std::string& path, int vocab, int tokens, uint32_t seed = 5,
                                         bool no_repeats = false) {
  std::mt19937 gen(seed);
  std::vector<double> weights(vocab);
  for (int v = 0; v < vocab; ++v) weights[v] = 1.0 / (v + 1);
  std::discrete_distribution<int> zipf(weights.begin(), weights.end());
  std::vector<int> ids(tokens);
  for (int i = 0; i < tokens; ++i) {
    ids[i] = i % 7 == 3 && i > 0 ? (ids[i - 1] + 1) % vocab : zipf(gen);
    while (no_repeats && i > 0 && ids[i] == ids[i - 1]) ids[i] = zipf(gen);
  }
  write_token_shard(path, ids, vocab, "bytes", 1);
  return path;
}

// Tiny MoE: 2 layers (layer 0 dense, layer 1 MoE), 4 experts top-2, dropless.
inline Config tiny_training_config(const std::string& shard) {
  Config c;
  c.source = "tiny-test";
  c.model.vocab_size = 64;
  c.model.hidden_size = 32;
  c.model.num_layers = 2;
  c.model.num_heads = 4;
  c.model.ffn_hidden_size = 48;
  c.model.seq_length = 16;
  c.model.moe.num_experts = 4;
  c.model.moe.top_k = 2;
  c.model.moe.layer_freq = 2;
  c.model.moe.aux_loss_coeff = 0.01;
  c.model.moe.z_loss_coeff = 0.001;
  c.train.global_batch_size = 8;
  c.train.steps = 20;
  c.train.lr = 3e-3;
  c.train.min_lr = 3e-4;
  c.train.warmup_steps = 3;
  c.train.seed = 99;
  c.data.train = shard;
  c.parallel.micro_batch_num = 2;
  return c;
}

}  // namespace moe4d::test
