// Training on a blend of two sources prepared in different formats — a JSONL corpus written as a
// moe4d shard and a text corpus written as a Megatron indexed dataset — configured through YAML:
// checkpoint/resume is bit-exact, the metrics record the tokens drawn per source, the config forms
// of data.train (list, Megatron's flat string) parse and bad ones are named, and a tokenizer larger
// than model.vocab_size is refused at train time.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "../data/data_test_util.h"
#include "config/config_loader.h"
#include "core/error.h"
#include "data/prepare.h"
#include "train/trainer.h"
#include "train/training_data.h"

namespace moe4d {
namespace {

using test::expect_error;
using test::TempDir;

std::string tiny_yaml(const std::string& data_section, int vocab = 257) {
  return fmt::format(R"(model:
  vocab_size: {}
  hidden_size: 32
  num_layers: 2
  num_heads: 4
  ffn_hidden_size: 48
  seq_length: 16
  moe: {{num_experts: 4, top_k: 2, layer_freq: 2}}
parallel_config: {{micro_batch_num: 2}}
train: {{global_batch_size: 8, steps: 12, lr: 0.003, min_lr: 0.0003, warmup_steps: 2, seed: 99}}
data:
{}
)",
                     vocab, data_section);
}

class DataBlendTraining : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string jsonl, text;
    for (int i = 0; i < 80; ++i) jsonl += fmt::format("{{\"text\": \"json document {} about {}\"}}\n", i, i * 37 % 11);
    for (int i = 0; i < 80; ++i) text += fmt::format("plain text paragraph {}\nwith {} lines\n\n", i, i % 5);
    test::write_file(dir_.file("a.jsonl"), jsonl);
    test::write_file(dir_.file("b.txt"), text);
    PrepareOptions o;
    o.tokenizer = "bytes";
    o.inputs = {dir_.file("a.jsonl")};
    o.output_dir = dir_.file("json_src");
    prepare_corpus(o);
    o.inputs = {dir_.file("b.txt")};
    o.output_dir = dir_.file("megatron_src");
    o.output_format = "megatron";
    prepare_corpus(o);
  }
  Config blend_config(const std::string& ckpt) {
    Config c = parse_config(tiny_yaml(fmt::format("  train:\n    - {{path: {}, weight: 0.7}}\n"
                                                  "    - {{path: {}, weight: 0.3, format: megatron}}\n",
                                                  dir_.file("json_src/train"), dir_.file("megatron_src/train"))),
                            "blend.yaml");
    c.checkpoint.dir = ckpt;
    c.checkpoint.interval = 6;
    c.train.metrics_file = ckpt + ".metrics.jsonl";
    return c;
  }
  TempDir dir_;
};

TEST_F(DataBlendTraining, JsonlPlusMegatronBlendResumesBitExact) {
  auto pc = make_single_rank_context();
  std::vector<double> straight;
  std::map<std::string, FullTensor> straight_params;
  {
    Config c = blend_config(dir_.file("straight"));
    c.checkpoint.dir.clear();
    Trainer trainer(c, *pc, {.quiet = true});
    for (int i = 0; i < 12; ++i) straight.push_back(trainer.train_step().loss);
    straight_params = trainer.gather_parameters();
  }
  const Config c = blend_config(dir_.file("ckpt"));
  {
    Trainer trainer(c, *pc, {.exit_after = 6, .quiet = true});
    trainer.run();
    ASSERT_EQ(trainer.step(), 6);
  }
  Trainer resumed(c, *pc, {.resume_from = c.checkpoint.dir, .quiet = true});
  ASSERT_EQ(resumed.step(), 6);
  for (int i = 6; i < 12; ++i) EXPECT_EQ(resumed.train_step().loss, straight[size_t(i)]) << "step " << i + 1;
  auto params = resumed.gather_parameters();
  ASSERT_EQ(params.size(), straight_params.size());
  for (auto& [name, t] : params)
    EXPECT_EQ(0, std::memcmp(t.data.data(), straight_params.at(name).data.data(), t.data.bytes())) << name;

  // The metrics of the first run record, per step, the tokens drawn from each source.
  std::ifstream metrics(c.train.metrics_file);
  int64_t from_json = 0, from_megatron = 0, lines = 0;
  for (std::string line; std::getline(metrics, line); ++lines) {
    nlohmann::json r = nlohmann::json::parse(line);
    const nlohmann::json& per_source = r.at("data").at("tokens_per_source");
    from_json += per_source.at(dir_.file("json_src/train")).get<int64_t>();
    from_megatron += per_source.at(dir_.file("megatron_src/train")).get<int64_t>();
    EXPECT_EQ(per_source.at(dir_.file("json_src/train")).get<int64_t>() +
                  per_source.at(dir_.file("megatron_src/train")).get<int64_t>(),
              8 * 16);
  }
  EXPECT_GE(lines, 6);
  EXPECT_NEAR(double(from_json) / double(from_json + from_megatron), 0.7, 0.1);
}

TEST_F(DataBlendTraining, ConfigFormsOfDataTrain) {
  const std::string a = dir_.file("json_src/train"), b = dir_.file("megatron_src/train");
  Config flat = parse_config(tiny_yaml(fmt::format("  train: \"0.7 {} 0.3 {}\"\n  format: megatron", b, b)), "f.yaml");
  ASSERT_EQ(flat.data.train_sources.size(), 2u);
  EXPECT_EQ(flat.data.train_sources[0].weight, 0.7);
  EXPECT_EQ(flat.data.train_sources[1].path, b);
  EXPECT_EQ(flat.data.train, b);
  EXPECT_EQ(open_training_blend(flat)->num_sources(), 2);
  Config plain = parse_config(tiny_yaml("  train: " + a), "p.yaml");
  ASSERT_EQ(plain.data.train_sources.size(), 1u);
  EXPECT_EQ(parse_config(config_to_yaml(plain), "again.yaml").data, plain.data);
  Config listed = blend_config("");
  EXPECT_EQ(parse_config(config_to_yaml(listed), "again.yaml").data, listed.data);

  expect_error([&] { parse_config(tiny_yaml("  train: \"0.7 a 0.3\""), "odd.yaml"); }, {"odd.yaml:", "data.train", "3 words"});
  expect_error([&] { parse_config(tiny_yaml("  train: \"x a 0.3 b\""), "w.yaml"); }, {"w.yaml:", "'x'", "weight"});
  expect_error([&] { parse_config(tiny_yaml("  train: \"-1 a 1 b\""), "neg.yaml"); }, {"neg.yaml:", "positive weights"});
  expect_error([&] { parse_config(tiny_yaml("  train:\n    - {path: a, weight: 0}"), "z.yaml"); },
               {"z.yaml:", "data.train[0].weight", "positive"});
  expect_error([&] { parse_config(tiny_yaml("  train:\n    - {path: a, format: hdf5}"), "f.yaml"); },
               {"data.train[0].format", "moe4d or megatron", "'hdf5'"});
  expect_error([&] { parse_config(tiny_yaml("  train:\n    - {weight: 1}"), "m.yaml"); }, {"data.train[0].path"});
  expect_error([&] { parse_config(tiny_yaml("  train:\n    - {path: a, wieght: 1}"), "k.yaml"); },
               {"k.yaml:", "data.train[0].wieght", "unknown key"});
  expect_error([&] { parse_config(tiny_yaml("  train: a\n  format: arrow"), "fmt.yaml"); }, {"data.format", "'arrow'"});
  // A moe4d source given as Megatron is reported with the files looked for.
  Config wrong = parse_config(tiny_yaml("  train: " + a + "\n  format: megatron"), "wrong.yaml");
  expect_error([&] { open_training_blend(wrong); }, {"Megatron dataset", a + ".idx"});
}

TEST_F(DataBlendTraining, TokenizerVocabularyIsCheckedAtTrainTime) {
  // The bytes tokenizer has 257 ids; a model with 200 cannot embed them.
  Config small = parse_config(tiny_yaml("  train: " + dir_.file("json_src/train"), 200), "small.yaml");
  expect_error([&] { open_training_blend(small); }, {"small.yaml", "vocab_size 257", "model.vocab_size 200"});
  // Megatron files record no vocabulary: every id read is checked instead (letters are >= 100).
  Config megatron = parse_config(tiny_yaml("  train: " + dir_.file("megatron_src/train") + "\n  format: megatron", 100),
                                 "mg.yaml");
  auto blend = open_training_blend(megatron);
  std::vector<int32_t> in(8 * 16), tg(8 * 16);
  expect_error([&] { blend->fill_batch(1, 1, 0, 8, in.data(), tg.data()); }, {"megatron_src/train.bin", "outside [0, 100)"});
}

}  // namespace
}  // namespace moe4d
