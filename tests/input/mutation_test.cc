// The mutation test: >= 500 damaged configs derived from configs/*.yaml and >= 50 damaged shards and
// tokenizers go through the real pre-training checks of `moe4d train` (load + preflight_train, in
// process). Whatever the damage: no crash or exception other than moe4d::Error (a signal fails
// the whole test binary), every input that is certainly invalid is refused, and every refusal is one
// line naming the config key or the file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <sstream>
#include <vector>

#include "../data/data_test_util.h"
#include "data/bpe_trainer.h"
#include "data/data_check.h"
#include "input_test_util.h"

namespace moe4d {
namespace {

// Every key of the schema (config/config.h), so that a message can be checked for naming one.
const char* const kKeys[] = {
    "vocab_size", "hidden_size", "num_layers", "num_heads", "ffn_hidden_size", "seq_length", "tie_embeddings", "moe",
    "num_experts", "top_k", "layer_freq", "capacity_factor", "aux_loss_coeff", "z_loss_coeff",
    "router_bias_update_rate", "a2a_chunks", "dispatcher", "redundant_experts", "rebalance_interval", "data_parallel", "expert_parallel", "tensor_parallel",
    "pipeline_parallel", "micro_batch_num", "gradient_aggregation_group", "grad_bucket_size",
    "zero3_prefetch_buckets", "recompute", "zero_stage",
    "pipeline_schedule", "virtual_pipeline", "stage_layers", "rank_order", "device_list", "local_worker_num",
    "collective_timeout", "overlap_grad_reduce", "model_parallel", "pipeline_stage", "enable_parallel_optimizer",
    "global_batch_size", "steps", "lr", "min_lr", "warmup_steps", "weight_decay", "grad_clip", "beta1", "beta2", "eps",
    "seed", "precision", "loss_scale", "max_nonfinite_steps", "grad_compression", "optimizer", "freeze_steps",
    "log_interval", "eval_interval", "eval_batches", "metrics_file", "initial", "factor", "window", "hysteresis",
    "train", "valid", "tokenizer", "dir", "interval", "keep", "model", "parallel_config", "data", "checkpoint",
    "granularity"};

bool names_a_key(const std::string& message) {
  // docs/model.md's wording of the world-size rule names the four factors dp, ep, tp, pp.
  if (message.find("parallel size mismatch: dp ") != std::string::npos) return true;
  for (const char* key : kKeys)
    if (std::regex_search(message, std::regex(std::string("(^|[^a-z_])") + key + "([^a-z_]|$)"))) return true;
  return false;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += line + "\n";
  return out;
}

// The world size a config asks for (so the layout check is not what refuses every mutation).
int world_of(const std::string& text) {
  try {
    const Config c = parse_config(text, "probe");
    return c.parallel.world_size();
  } catch (const Error&) {
    return 1;
  }
}

struct Mutation {
  std::string text;
  std::string description;
  std::string key;       // the key whose value was replaced ("" for structural damage)
  bool invalid = false;  // certainly invalid: must be refused
};

class ConfigMutator {
 public:
  ConfigMutator(std::string base, uint32_t seed) : base_(std::move(base)), lines_(split_lines(base_)), rng_(seed) {
    for (size_t i = 0; i < lines_.size(); ++i) {
      std::smatch m;
      if (std::regex_match(lines_[i], m, std::regex("( *)([a-z_0-9]+):(.*)"))) keyed_.push_back(i);
      if (std::regex_match(lines_[i], m, std::regex(" *[a-z_0-9]+: *[-+0-9.eE]+ *"))) numeric_.push_back(i);
    }
  }

  Mutation next() {
    std::vector<std::string> lines = lines_;
    Mutation out;
    switch (pick(9)) {
      case 0:
      case 1:
      case 2: {  // a numeric value replaced by something hostile
        const size_t i = numeric_[pick(numeric_.size())];
        static const char* const kHuge[] = {"2147483647", "2147483648", "4294967296", "9223372036854775807",
                                            "99999999999999999999", "65536", "1000000", "819267", "1e300"};
        static const char* const kBad[] = {"-1", "-2147483648", "0", "abc", "[1, 2]", "{a: 1}", "\"\"", "null",
                                           "0x10", "1.5.2", "true"};
        const std::string key = key_of(lines[i]);
        const bool bad = pick(2) == 0;
        const std::string value = bad ? kBad[pick(std::size(kBad))] : kHuge[pick(std::size(kHuge))];
        lines[i] = lines[i].substr(0, lines[i].find(':') + 1) + " " + value;
        out.key = key;
        out.description = "set " + key + " to " + value;
        // Every numeric key of the schema is >= 0, and these spellings are never numbers.
        const std::string v = value;
        out.invalid = bad && (v == "-1" || v == "-2147483648" || v == "abc" || v == "[1, 2]" || v == "{a: 1}" ||
                              v == "0x10" || v == "1.5.2" || v == "true" || v == "\"\"");
        break;
      }
      case 3: {  // a key dropped (with the block under it)
        const size_t i = keyed_[pick(keyed_.size())];
        const size_t indent = lines[i].find_first_not_of(' ');
        size_t end = i + 1;
        while (end < lines.size() && (lines[end].empty() || lines[end].find_first_not_of(' ') > indent)) ++end;
        out.description = "dropped " + key_of(lines[i]);
        lines.erase(lines.begin() + static_cast<long>(i), lines.begin() + static_cast<long>(end));
        break;
      }
      case 4: {  // a scalar key repeated
        const size_t i = numeric_[pick(numeric_.size())];
        out.description = "repeated " + key_of(lines[i]);
        lines.insert(lines.begin() + static_cast<long>(i) + 1, lines[i]);
        out.invalid = true;
        break;
      }
      case 5: {  // a line truncated
        const size_t i = pick(lines.size());
        const size_t at = lines[i].empty() ? 0 : pick(lines[i].size());
        out.description = "line " + std::to_string(i + 1) + " cut at " + std::to_string(at);
        lines[i] = lines[i].substr(0, at);
        break;
      }
      case 6: {  // bytes flipped
        std::string text = join_lines(lines);
        const int flips = 1 + pick(3);
        for (int f = 0; f < flips; ++f) text[pick(text.size())] ^= static_cast<char>(1 << pick(8));
        out.text = text;
        out.description = std::to_string(flips) + " bytes flipped";
        return out;
      }
      case 7: {  // an unknown key
        const size_t i = keyed_[pick(keyed_.size())];
        const std::string indent(lines[i].find_first_not_of(' '), ' ');
        lines.insert(lines.begin() + static_cast<long>(i), indent + "no_such_key: 1");
        out.description = "unknown key before line " + std::to_string(i + 1);
        out.invalid = true;
        break;
      }
      default: {  // a second document
        const size_t i = 1 + pick(lines.size() - 1);
        // Only a marker after content starts a second document (one after comments is the first).
        for (size_t j = 0; j < i; ++j)
          if (lines[j].find_first_not_of(' ') != std::string::npos && lines[j][lines[j].find_first_not_of(' ')] != '#')
            out.invalid = true;
        lines.insert(lines.begin() + static_cast<long>(i), "---");
        out.description = "'---' before line " + std::to_string(i + 1);
        break;
      }
    }
    out.text = join_lines(lines);
    return out;
  }

 private:
  size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  static std::string key_of(const std::string& line) {
    const size_t start = line.find_first_not_of(' ');
    return line.substr(start, line.find(':') - start);
  }

  std::string base_;
  std::vector<std::string> lines_;
  std::vector<size_t> keyed_, numeric_;
  std::mt19937 rng_;
};

// Points a config's data section at the test's shard (so valid mutations get through the data
// check) and its checkpoint dir into the temporary directory.
std::string with_test_data(const std::string& text, const std::string& shard) {
  std::string out = std::regex_replace(text, std::regex("\n  train: [^\n]*"), "\n  train: " + shard + ".bin");
  out = std::regex_replace(out, std::regex("\n  valid: [^\n]*"), "\n  valid: " + shard + ".bin");
  return std::regex_replace(out, std::regex("\n  tokenizer: [^\n]*"), "\n  tokenizer: bytes");
}

TEST(MutationTest, DamagedConfigsAreRefusedWithTheKey) {
  test::TempDir dir("moe4d-mutation");
  const std::string shard = test::write_text_shard(dir.file("train"));
  std::vector<std::string> bases;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(MOE4D_SOURCE_DIR) + "/configs"))
    if (entry.path().extension() == ".yaml") bases.push_back(entry.path().string());
  std::sort(bases.begin(), bases.end());
  ASSERT_GE(bases.size(), 3u);

  int runs = 0, refused = 0, accepted = 0;
  for (size_t b = 0; b < bases.size(); ++b) {
    const std::string base = with_test_data(test::read_file(bases[b]), shard);
    const int world = world_of(base);
    ConfigMutator mutator(base, 1000 + static_cast<uint32_t>(b));
    for (int n = 0; n < 120; ++n, ++runs) {
      const Mutation m = mutator.next();
      const std::string name = "mutant.yaml";
      SCOPED_TRACE(bases[b] + ": " + m.description);
      try {
        test::preflight_text(m.text, name, world);
        ++accepted;
        EXPECT_FALSE(m.invalid) << "accepted an invalid config:\n" << m.text;
      } catch (const Error& e) {
        ++refused;
        const std::string message = e.what();
        EXPECT_EQ(message.find('\n'), std::string::npos) << message;
        EXPECT_TRUE(message.find(name) != std::string::npos || names_a_key(message))
            << "names neither the file nor a key: " << message;
        if (!m.key.empty() && message.find(name + ":") != std::string::npos &&
            message.find("invalid YAML") == std::string::npos) {
          EXPECT_TRUE(names_a_key(message)) << message;
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "escaped as " << typeid(e).name() << ": " << e.what() << "\n" << m.text;
      }
    }
  }
  EXPECT_GE(runs, 500);
  EXPECT_GT(refused, runs / 2);
  EXPECT_GT(accepted, 0) << "no mutation was harmless: the base configs do not pass";
  std::printf("[ mutation ] %d configs: %d refused, %d accepted\n", runs, refused, accepted);
}

// Shards and tokenizers: damaged copies of a valid shard (.bin and .json) and of a sentencepiece
// model, through check_training_data.
TEST(MutationTest, DamagedShardsAndTokenizersAreRefusedWithTheFile) {
  test::TempDir dir("moe4d-mutation-data");
  const std::string clean = test::write_text_shard(dir.file("clean"), 80);
  const std::string clean_bin = test::read_file(clean + ".bin");
  const std::string clean_json = test::read_file(clean + ".json");
  std::vector<std::string> lines;
  for (int i = 0; i < 300; ++i) lines.push_back("line " + std::to_string(i) + " of a small tokenizer corpus\n");
  const std::string model = train_bpe_tokenizer_on_lines(lines, 300, dir.file("tok"), 1, "lines");
  const std::string clean_model = test::read_file(model);
  std::mt19937 rng(7);
  const auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };

  int runs = 0, refused = 0;
  const auto run = [&](const std::string& what, const std::string& file, const TrainingDataSpec& spec, bool invalid) {
    ++runs;
    SCOPED_TRACE(what);
    try {
      check_training_data(spec);
      EXPECT_FALSE(invalid) << "accepted";
    } catch (const Error& e) {
      ++refused;
      const std::string message = e.what();
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
      EXPECT_NE(message.find(file), std::string::npos) << "does not name " << file << ": " << message;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "escaped as " << typeid(e).name() << ": " << e.what();
    }
  };
  const std::string stem = dir.file("s");
  const TrainingDataSpec shard_spec{.source = "run.yaml", .train = stem + ".bin", .tokenizer = "bytes",
                                    .model_vocab_size = 300};
  for (int n = 0; n < 40; ++n) {  // .bin: any change of the payload is refused
    std::string b = clean_bin;
    std::string what;
    switch (n % 4) {
      case 0: b[pick(b.size())] ^= static_cast<char>(1 << pick(8)); what = "bin byte flipped"; break;
      case 1: b.resize(pick(b.size())); what = "bin truncated"; break;
      case 2: b += std::string(1 + pick(9), 'x'); what = "bin extended"; break;
      default: std::fill(b.begin() + static_cast<long>(pick(b.size())), b.end(), '\0'); what = "bin zeroed"; break;
    }
    test::write_file(stem + ".bin", b);
    test::write_file(stem + ".json", clean_json);
    run(what, stem + ".", shard_spec, b != clean_bin);
  }
  for (int n = 0; n < 40; ++n) {  // .json: refused unless the damage left the same header
    std::string j = clean_json;
    std::string what;
    switch (n % 3) {
      case 0: j[pick(j.size())] ^= static_cast<char>(1 << pick(8)); what = "json byte flipped"; break;
      case 1: j.resize(pick(j.size())); what = "json truncated"; break;
      default: {
        static const char* const kFields[] = {"num_tokens", "vocab_size", "documents", "version"};
        const std::string field = kFields[pick(4)];
        nlohmann::json h = nlohmann::json::parse(clean_json);
        static const int64_t kValues[] = {-1, 0, 1, 65537, INT64_MAX};
        h[field] = kValues[pick(5)];
        j = h.dump();
        what = "json " + field + " changed";
      }
    }
    test::write_file(stem + ".bin", clean_bin);
    test::write_file(stem + ".json", j);
    run(what, stem + ".", shard_spec, false);
  }
  const TrainingDataSpec model_spec{.source = "run.yaml", .train = clean + ".bin", .tokenizer = dir.file("m.model"),
                                    .model_vocab_size = 300};
  for (int n = 0; n < 30; ++n) {  // tokenizer model: refused unless still a loadable model that fits
    std::string t = clean_model;
    std::string what;
    switch (n % 3) {
      case 0: for (int f = 0; f < 8; ++f) t[pick(t.size())] ^= static_cast<char>(1 << pick(8)); what = "model bytes flipped"; break;
      case 1: t.resize(pick(t.size() / 2)); what = "model truncated"; break;
      default: for (char& c : t) c = static_cast<char>(pick(256)); what = "model replaced by noise"; break;
    }
    test::write_file(dir.file("m.model"), t);
    run(what, dir.file("m.model"), model_spec, false);
  }
  std::filesystem::remove(dir.file("m.model"));
  run("model missing", dir.file("m.model"), model_spec, true);
  std::filesystem::create_directory(dir.file("m.model"));
  run("model is a directory", dir.file("m.model"), model_spec, true);
  EXPECT_GE(runs, 50);
  std::printf("[ mutation ] %d shards and tokenizers: %d refused\n", runs, refused);
}

}  // namespace
}  // namespace moe4d
