// tests/input/input_test_util.h — a small valid training setup (config text + byte-tokenized shard)
// for the hostile-input tests, and a check that an error is one line naming given parts.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "../common/temp_dir.h"
#include "cli/train_preflight.h"
#include "config/config_loader.h"
#include "core/error.h"
#include "data/byte_tokenizer.h"
#include "data/token_shard_writer.h"

namespace moe4d::test {

// What the machine offers a rank in these tests (the figure of the example).
inline RankMemory test_machine() { return RankMemory{23.4 * 1024 * 1024 * 1024, "test machine"}; }

// A byte-tokenized shard of `documents` short documents; returns its stem.
inline std::string write_text_shard(const std::string& stem, int documents = 50) {
  ByteTokenizer tokenizer;
  std::vector<int> ids;
  for (int i = 0; i < documents; ++i) {
    for (int id : tokenizer.encode("document " + std::to_string(i) + ": the quick brown fox jumps over the dog"))
      ids.push_back(id);
    ids.push_back(tokenizer.eos_id());
  }
  write_token_shard(stem, ids, ByteTokenizer::kVocabSize, "bytes", documents);
  return stem;
}

// A tiny valid MoE config on `shard` (one rank), with `extra` lines appended to sections by the caller.
inline std::string tiny_config_text(const std::string& shard) {
  return "model:\n"
         "  vocab_size: 260\n"
         "  hidden_size: 32\n"
         "  num_layers: 2\n"
         "  num_heads: 4\n"
         "  ffn_hidden_size: 48\n"
         "  seq_length: 16\n"
         "  moe:\n"
         "    num_experts: 4\n"
         "    top_k: 2\n"
         "train:\n"
         "  global_batch_size: 2\n"
         "  steps: 1\n"
         "data:\n"
         "  train: " + shard + "\n"
         "  tokenizer: bytes\n";
}

// Parses `text` as `name` and runs every check `moe4d train` makes before allocating.
inline void preflight_text(const std::string& text, const std::string& name, int world_size = 1) {
  const Config config = parse_config(text, name);
  preflight_train(config, world_size, test_machine());
}

// Runs `body`, which must throw moe4d::Error whose message is one line containing every part.
inline std::string expect_one_line_error(const std::function<void()>& body, std::initializer_list<std::string> parts) {
  try {
    body();
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << "message spans lines: " << message;
    for (const std::string& part : parts)
      EXPECT_NE(message.find(part), std::string::npos) << "missing \"" << part << "\" in: " << message;
    return message;
  }
  ADD_FAILURE() << "expected moe4d::Error";
  return "";
}

}  // namespace moe4d::test
