// Config sizes that the loader accepts but the runtime cannot represent or this machine cannot
// hold are refused before anything is allocated, naming the key; multi-document YAML is refused
// at its '---'; the planner's micro-batch messages name the config's keys, not --layout flags.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include "config/size_limits.h"
#include "input_test_util.h"
#include "plan/layout.h"
#include "plan/memory_fit.h"

namespace moe4d {
namespace {

using test::expect_one_line_error;

// `text` with the value of the first line `<indent><key>: ...` replaced.
std::string with_value(const std::string& text, const std::string& key, const std::string& value) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex("\\n *" + key + ": ([^\\n]*)"))) {
    ADD_FAILURE() << "no key " << key;
    return text;
  }
  return text.substr(0, m.position(1)) + value + text.substr(m.position(1) + m.length(1));
}

class SizeLimitsTest : public ::testing::Test {
 protected:
  test::TempDir dir_{"moe4d-input"};
  std::string shard_ = test::write_text_shard(dir_.file("train"));
  std::string base_ = test::tiny_config_text(shard_ + ".bin");
};

TEST_F(SizeLimitsTest, TheBaseConfigPasses) { EXPECT_NO_THROW(test::preflight_text(base_, "base.yaml")); }

// The issue's reproducers: each aborted with std::bad_alloc / std::length_error.
TEST_F(SizeLimitsTest, IssueReproducersNameTheKey) {
  const struct {
    const char* key;
    const char* value;
    const char* named;
  } cases[] = {
      {"hidden_size", "65536", "model.hidden_size"},
      {"vocab_size", "2147483647", "model.vocab_size"},
      {"num_experts", "1000000", "model.moe.num_experts"},
      {"seq_length", "819267", "model.seq_length"},
      {"global_batch_size", "4294967296", "train.global_batch_size"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.key) + ": " + c.value);
    expect_one_line_error([&] { test::preflight_text(with_value(base_, c.key, c.value), "huge.yaml"); },
                          {"huge.yaml", c.named});
  }
}

TEST_F(SizeLimitsTest, ProductsAreFormedWithoutOverflow) {
  // 2^30 x 4 ranks wrap an int to 0; the check sees 4294967296. (tensor_parallel is at most
  // num_heads, checked with its line, so the huge factor is data_parallel.)
  std::string text = base_ + "parallel_config:\n  data_parallel: 1073741824\n  tensor_parallel: 4\n";
  expect_one_line_error([&] { test::preflight_text(text, "ranks.yaml"); }, {"ranks.yaml", "4294967296", "ranks"});
  // The largest tensor of this config has 2^31 elements: one past the limit.
  Config c = parse_config(with_value(with_value(base_, "hidden_size", "32768"), "num_heads", "4"), "edge.yaml");
  c.model.vocab_size = 65536;
  c.model.hidden_size = 32768;
  expect_one_line_error([&] { check_size_limits(c); }, {"edge.yaml", "model.vocab_size", "2147483648"});
}

TEST_F(SizeLimitsTest, MemoryBeyondTheMachineIsRefusedWithBothFigures) {
  // ~7B parameters in fp32 with AdamW: far over 23.4 GiB, every tensor representable.
  std::string text = with_value(base_, "hidden_size", "4096");
  text = with_value(text, "num_layers", "32");
  text = with_value(text, "num_heads", "32");
  text = with_value(text, "ffn_hidden_size", "11008");
  text = with_value(text, "vocab_size", "32000");
  text = with_value(text, "num_experts", "8");
  const std::string message = expect_one_line_error(
      [&] { test::preflight_text(text, "big.yaml"); },
      {"big.yaml", "per rank", "this machine has 23.4 GiB (test machine)", "try ", "zero_stage"});
  EXPECT_TRUE(std::regex_search(message, std::regex("needs [0-9]+\\.[0-9] GiB per rank"))) << message;
}

TEST_F(SizeLimitsTest, MemoryEstimateIsThePlannersModel) {
  const Config c = parse_config(base_, "base.yaml");
  const MemoryBreakdown m = config_memory_per_rank(c);
  EXPECT_GT(m.weights, 0);
  EXPECT_EQ(m.optimizer, 2 * m.weights);  // AdamW m and v, fp32 like the master weights
  EXPECT_GT(m.activations, 0);
  EXPECT_EQ(m.reserve, 0);
}

TEST(MachineMemoryTest, ReadsMemAvailableAndDividesByRanks) {
  test::TempDir dir("moe4d-meminfo");
  std::ofstream(dir.file("meminfo")) << "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   8000000 kB\n";
  const RankMemory m = this_machine_memory(4, dir.file("meminfo"));
  EXPECT_DOUBLE_EQ(m.bytes, 8000000.0 * 1024 / 4);
  EXPECT_NE(m.description.find("MemAvailable 7.6 GiB / 4 ranks per node"), std::string::npos) << m.description;
  std::ofstream(dir.file("old")) << "MemTotal: 1048576 kB\n";
  EXPECT_DOUBLE_EQ(this_machine_memory(1, dir.file("old")).bytes, 1048576.0 * 1024);
  expect_one_line_error([&] { this_machine_memory(1, dir.file("missing")); }, {"missing", "MemAvailable"});
}

TEST_F(SizeLimitsTest, MultiDocumentYamlIsRefusedAtTheMarker) {
  const std::string text = base_ + "---\ncheckpoint:\n  dir: runs/x\n";
  const int marker_line = static_cast<int>(std::count(base_.begin(), base_.end(), '\n')) + 1;
  expect_one_line_error([&] { parse_config(text, "two.yaml"); },
                        {"two.yaml:" + std::to_string(marker_line) + ": a second YAML document", "'---'"});
  expect_one_line_error([&] { parse_config(base_ + "...\nsteps: 3\n", "end.yaml"); }, {"end.yaml:", "second YAML"});
  // A leading '---' and comments before it are one document, as is a trailing comment, and an
  // end marker with nothing after it; an indented '---' is text inside the document.
  EXPECT_NO_THROW(parse_config("# config\n---\n" + base_ + "# end\n", "one.yaml"));
  EXPECT_NO_THROW(parse_config(base_ + "...\n# end\n", "one.yaml"));
  EXPECT_NO_THROW(parse_config(base_ + "checkpoint:\n  dir: |-\n    ---\n", "one.yaml"));
}

// Found by fuzz_config_loader: a path with control bytes and invalid UTF-8 did not survive
// config_to_yaml -> parse_config (the echo of the config in every checkpoint).
TEST(ConfigFuzzRegressionTest, StringsAreRefusedUnlessPrintableUtf8) {
  std::ifstream in(std::string(MOE4D_SOURCE_DIR) +
                   "/tests/fuzz/corpus/fuzz_config_loader/regression_roundtrip_control_bytes.yaml");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(text.empty());
  expect_one_line_error([&] { parse_config(text, "fuzz.yaml"); }, {"fuzz.yaml:", "data.train: byte", "UTF-8"});
  const std::string ok = "model: {vocab_size: 64, hidden_size: 32, num_layers: 1, num_heads: 4, ffn_hidden_size: 48, "
                         "seq_length: 16}\ntrain: {global_batch_size: 2, steps: 1}\ndata: {train: \"d\u00e4ta/\u65e5\u672c.bin\"}\n";
  const Config c = parse_config(ok, "utf8.yaml");
  EXPECT_EQ(c.data.train, "d\u00e4ta/\u65e5\u672c.bin");
  EXPECT_EQ(parse_config(config_to_yaml(c), "utf8.yaml"), c);
  expect_one_line_error([&] { parse_config(std::string(ok).replace(ok.find("d\u00e4"), 1, "\\t"), "tab.yaml"); },
                        {"tab.yaml:3: data.train: byte 0 (0x09)"});
}

// Found by fuzz_config_loader: yaml-cpp's LoadAll never returned on this input (a tag before a
// comment-like line), growing its list of documents until memory ran out.
TEST(ConfigFuzzRegressionTest, MalformedTagDoesNotLoopForever) {
  std::ifstream in(std::string(MOE4D_SOURCE_DIR) +
                   "/tests/fuzz/corpus/fuzz_config_loader/regression_loadall_endless.yaml");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(text.empty());
  try {
    parse_config(text, "fuzz.yaml");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fuzz.yaml"), std::string::npos) << e.what();
  }
}

TEST(PlanLayoutMessagesTest, ConfigMicroBatchesNameTheConfigKeys) {
  ParallelConfig p;
  p.micro_batch_num = 10000000;
  std::string message = expect_one_line_error([&] { layout_from_parallel_config(p, 8, 1); },
                                              {"parallel_config.micro_batch_num 10000000", "train.global_batch_size 8"});
  EXPECT_EQ(message.find("--layout"), std::string::npos) << message;
  // A micro-batch of 2^32 sequences used to wrap to mbs=-2147483648.
  p.micro_batch_num = 1;
  message = expect_one_line_error([&] { layout_from_parallel_config(p, 4294967296, 1); },
                                  {"train.global_batch_size 4294967296", "4294967296 sequences"});
  EXPECT_EQ(message.find("-2147483648"), std::string::npos) << message;
  // The flags keep their own names.
  expect_one_line_error([&] { parse_layout("dp=1,mb=3", 8, 1); }, {"--layout mb=3"});
  expect_one_line_error([&] { parse_layout("dp=1,mbs=1", 4294967296, 1); }, {"global batch 4294967296"});
}

}  // namespace
}  // namespace moe4d
