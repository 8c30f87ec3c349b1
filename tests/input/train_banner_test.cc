// tests/input/train_banner_test.cc — what the start of `moe4d train` says (cli/train_banner.h), on a
// config run through the real preflight: parameters, the micro-batch formula with the run's numbers,
// the data, both readings of the layout, the memory estimate and what the aux loss figure is.
#include "cli/train_banner.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "input_test_util.h"

namespace moe4d {
namespace {

std::string all_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += line + "\n";
  return out;
}

TEST(TrainBanner, NamesEverythingTheIssueAsks) {
  test::TempDir dir;
  const std::string shard = test::write_text_shard(dir.file("train"));
  std::string text = test::tiny_config_text(shard);
  // 8 ranks: dp 2 x ep 2 x tp 2, two micro-batches per replica, global batch 16.
  const std::string batch = "train:\n  global_batch_size: 2\n";
  text.replace(text.find(batch), batch.size(), "train:\n  global_batch_size: 16\n");
  text += "parallel_config: {data_parallel: 2, expert_parallel: 2, tensor_parallel: 2, micro_batch_num: 2}\n";
  Config config = parse_config(text, "banner.yaml");
  const TrainPreflight preflight = preflight_train(config, 8, test::test_machine());
  const std::string lines = all_lines(train_start_lines(config, preflight));
  for (const std::string& part : {
           std::string("parameters, "), std::string(" active per token"),
           std::string("micro-batch 2 sequences = train.global_batch_size 16 / (data_parallel 2 x expert_parallel 2 x "
                       "micro_batch_num 2)"),
           "data.train " + shard + " (moe4d format, 1 file, ",
           std::string(" 50 documents)"), std::string("data.valid not set"), std::string("tokenizer bytes (bytes, 257 ids)"),
           std::string("8 ranks = dp 2 x ep 2 x tp 2 x pp 1"),
           std::string("tensor-model-parallel 2, pipeline-model-parallel 1, expert-model-parallel 2, data-parallel 4"),
           std::string("per rank estimated by the planner's model"), std::string("test machine"),
           std::string("summed over the 2 MoE layers")})
    EXPECT_NE(lines.find(part), std::string::npos) << "missing \"" << part << "\" in:\n" << lines;
  // The older shard (written without an identity) is listed for the one warning.
  EXPECT_EQ(preflight.tokenizer.unrecorded, std::vector<std::string>{shard + ".json"});
}

}  // namespace
}  // namespace moe4d
