// tests/data/prepare_test.cc — prepare_corpus end to end on a small two-file corpus, and its errors.
#include "data/prepare.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "data/corpus_reader.h"
#include "data/token_dataset.h"
#include "data/megatron_indexed_dataset.h"
#include "data/tokenizer.h"
#include "data/tokenizer_record.h"
#include "data_test_util.h"
#include "fortunes_sample.h"

namespace moe4d {
namespace {

namespace fs = std::filesystem;
using test::expect_error;

// Splits the shard at end-of-sequence ids and decodes every document.
std::vector<std::string> decode_documents(const TokenDataset& dataset, const Tokenizer& tokenizer) {
  std::vector<int32_t> ids(dataset.num_tokens());
  dataset.read(0, dataset.num_tokens(), ids.data());
  EXPECT_EQ(ids.back(), tokenizer.eos_id());  // every document, the last included, ends with EOS
  std::vector<std::string> documents;
  std::vector<int> current;
  for (int32_t id : ids) {
    if (id == tokenizer.eos_id()) {
      documents.push_back(tokenizer.decode(current));
      current.clear();
    } else {
      current.push_back(id);
    }
  }
  return documents;
}

class PrepareTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Two files holding the two halves of the sample, plus what a fortunes directory also holds.
    corpus_dir_ = dir_.file("corpus");
    fs::create_directories(corpus_dir_);
    std::string text = test::kFortunesSample;
    size_t middle = text.find("\n%\n", text.size() / 2) + 3;
    test::write_file(corpus_dir_ + "/first", text.substr(0, middle));
    test::write_file(corpus_dir_ + "/second", text.substr(middle));
    test::write_file(corpus_dir_ + "/first.dat", std::string("\0\0\0\2binary index", 16));
    fs::create_symlink(corpus_dir_ + "/first", corpus_dir_ + "/first.u8");
    documents_ = split_documents(text);
  }

  PrepareOptions options(const std::string& out) const {
    PrepareOptions o;
    o.inputs = {corpus_dir_};
    o.output_dir = dir_.file(out);
    o.valid_fraction = 0.2;
    o.seed = 11;
    return o;
  }

  // Train and valid shards decode to exactly the corpus documents, each once.
  void expect_shards_hold_corpus(const PrepareSummary& summary) {
    std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(summary.tokenizer_spec);
    TokenDataset train = TokenDataset::open(summary.train_path, /*verify=*/true);
    TokenDataset valid = TokenDataset::open(summary.valid_path, /*verify=*/true);
    EXPECT_EQ(train.tokenizer_spec(), summary.tokenizer_spec);
    EXPECT_EQ(train.vocab_size(), tokenizer->vocab_size());
    EXPECT_EQ(train.num_tokens(), summary.train_tokens);
    EXPECT_EQ(valid.num_tokens(), summary.valid_tokens);
    EXPECT_EQ(train.num_documents(), summary.train_documents);
    EXPECT_EQ(valid.num_documents(), summary.valid_documents);
    std::vector<std::string> all = decode_documents(train, *tokenizer);
    std::vector<std::string> held_out = decode_documents(valid, *tokenizer);
    EXPECT_EQ(static_cast<int64_t>(all.size()), summary.train_documents);
    EXPECT_EQ(static_cast<int64_t>(held_out.size()), summary.valid_documents);
    all.insert(all.end(), held_out.begin(), held_out.end());
    std::vector<std::string> expected = documents_;
    std::sort(all.begin(), all.end());
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(all, expected);
  }

  test::TempDir dir_;
  std::string corpus_dir_;
  std::vector<std::string> documents_;
};

TEST_F(PrepareTest, BpeEndToEnd) {
  PrepareOptions o = options("out");
  o.vocab_size = 400;
  std::vector<std::string> progress;
  o.progress = [&](const std::string& line) { progress.push_back(line); };
  PrepareSummary summary = prepare_corpus(o);

  EXPECT_EQ(summary.files, 2);  // first.dat and the first.u8 symlink are skipped
  EXPECT_EQ(summary.documents, static_cast<int64_t>(documents_.size()));
  EXPECT_EQ(summary.train_documents + summary.valid_documents, summary.documents);
  // ~20% held out of ~120 documents.
  EXPECT_GT(summary.valid_documents, 10);
  EXPECT_LT(summary.valid_documents, 45);
  EXPECT_EQ(summary.vocab_size, 400);
  EXPECT_EQ(summary.tokenizer_spec, dir_.file("out/tokenizer.model"));
  EXPECT_TRUE(fs::exists(dir_.file("out/tokenizer.model")));
  for (const char* name : {"train.bin", "train.json", "valid.bin", "valid.json"})
    EXPECT_TRUE(fs::exists(dir_.file("out/") + name)) << name;
  EXPECT_EQ(
      std::count_if(fs::directory_iterator(dir_.file("out")), fs::directory_iterator(), [](auto&) { return true; }),
      5);  // no temporary files left
  EXPECT_NE(test::read_file(dir_.file("out/train.json")).find("\"tokenizer\": \"tokenizer.model\""), std::string::npos);
  expect_shards_hold_corpus(summary);
  EXPECT_GE(progress.size(), 4u);
  EXPECT_NE(format_prepare_summary(summary).find("model.vocab_size >= 400"), std::string::npos);

  // Same inputs and options: byte-identical outputs. Another seed: another split.
  PrepareOptions o2 = options("again");
  o2.vocab_size = 400;
  prepare_corpus(o2);
  for (const char* name : {"tokenizer.model", "train.bin", "train.json", "valid.bin", "valid.json"})
    EXPECT_EQ(test::read_file(dir_.file("out/") + name), test::read_file(dir_.file("again/") + name)) << name;
  PrepareOptions o3 = options("reseeded");
  o3.vocab_size = 400;
  o3.seed = 12;
  prepare_corpus(o3);
  EXPECT_NE(test::read_file(dir_.file("out/valid.bin")), test::read_file(dir_.file("reseeded/valid.bin")));
}

TEST_F(PrepareTest, BytesEndToEndAndMovableOutput) {
  PrepareOptions o = options("bytes_out");
  o.tokenizer = "bytes";
  PrepareSummary summary = prepare_corpus(o);
  EXPECT_EQ(summary.vocab_size, 257);
  EXPECT_EQ(summary.tokenizer_spec, "bytes");
  EXPECT_FALSE(fs::exists(dir_.file("bytes_out/tokenizer.model")));
  // Byte shards hold every document byte plus one EOS per document.
  EXPECT_EQ(summary.train_tokens + summary.valid_tokens, summary.document_bytes + summary.documents);
  expect_shards_hold_corpus(summary);

  // A BPE output directory still works after being moved: the header names the model relatively.
  PrepareOptions b = options("bpe_out");
  b.vocab_size = 400;
  prepare_corpus(b);
  fs::rename(dir_.file("bpe_out"), dir_.file("moved"));
  TokenDataset moved = TokenDataset::open(dir_.file("moved/valid"), /*verify=*/true);
  EXPECT_EQ(moved.tokenizer_spec(), dir_.file("moved/tokenizer.model"));
  EXPECT_EQ(load_tokenizer(moved.tokenizer_spec())->vocab_size(), 400);
}

TEST_F(PrepareTest, Errors) {
  PrepareOptions o = options("err");
  o.inputs = {dir_.file("nothing-here")};
  expect_error([&] { prepare_corpus(o); }, {dir_.file("nothing-here"), "does not exist"});

  fs::create_directories(dir_.file("dats"));
  test::write_file(dir_.file("dats/x.dat"), "x");
  o.inputs = {dir_.file("dats")};
  expect_error([&] { prepare_corpus(o); }, {"no corpus files found", dir_.file("dats")});

  test::write_file(dir_.file("blank"), "%\n   \n%\n\n");
  o.inputs = {dir_.file("blank")};
  expect_error([&] { prepare_corpus(o); }, {"corpus is empty", "1 input files"});

  test::write_file(dir_.file("single"), "just one fortune\n");
  o.inputs = {dir_.file("single")};
  expect_error([&] { prepare_corpus(o); }, {"only 1 document"});

  o = options("err");
  test::write_file(dir_.file("a-file"), "x");
  o.output_dir = dir_.file("a-file/out");
  expect_error([&] { prepare_corpus(o); }, {"cannot create output directory", dir_.file("a-file/out")});

  o = options("err");
  o.vocab_size = 100;
  expect_error([&] { prepare_corpus(o); }, {"vocab size 100", "too small"});
  o.vocab_size = 300;  // passes the early check, but ~73 characters + 258 reserved ids do not fit
  expect_error([&] { prepare_corpus(o); }, {"vocab size 300 is too small for the train documents", "at least 3"});

  o = options("err");
  o.tokenizer = "bytes";
  o.vocab_size = 512;
  expect_error([&] { prepare_corpus(o); }, {"vocab size 512", "bytes tokenizer", "257"});
  o = options("err");
  o.tokenizer = "wordpiece";
  expect_error([&] { prepare_corpus(o); }, {"\"wordpiece\"", "bpe", "bytes"});
  for (double fraction : {1.0, -0.5}) {
    o = options("err");
    o.valid_fraction = fraction;
    expect_error([&] { prepare_corpus(o); }, {"valid fraction", "[0, 1)"});
  }
  o = options("err");
  o.valid_fraction = 0;
  o.min_valid_documents = 2;
  expect_error([&] { prepare_corpus(o); }, {"--min-valid-documents 2", "--valid-fraction 0"});
  o = options("");
  o.output_dir = "";
  expect_error([&] { prepare_corpus(o); }, {"no output directory"});
}

TEST_F(PrepareTest, ValidFractionZeroWritesNoValidShardAndRemovesAnOldOne) {
  PrepareOptions o = options("no_valid");
  o.tokenizer = "bytes";
  prepare_corpus(o);  // an earlier run with a validation split
  ASSERT_TRUE(fs::exists(dir_.file("no_valid/valid.bin")));
  o.valid_fraction = 0;
  const PrepareSummary summary = prepare_corpus(o);
  EXPECT_EQ(summary.valid_documents, 0);
  EXPECT_EQ(summary.train_documents, summary.documents);
  EXPECT_TRUE(summary.valid_path.empty());
  EXPECT_TRUE(summary.valid_shards.empty());
  EXPECT_FALSE(fs::exists(dir_.file("no_valid/valid.bin")));
  EXPECT_FALSE(fs::exists(dir_.file("no_valid/valid.json")));
  EXPECT_NE(format_prepare_summary(summary).find("valid:     none (--valid-fraction 0"), std::string::npos);
  EXPECT_EQ(TokenDataset::open(dir_.file("no_valid/train")).num_documents(), summary.documents);
}

TEST_F(PrepareTest, SummaryNamesTheInputs) {
  PrepareOptions o = options("named");
  o.tokenizer = "bytes";
  const std::string text = format_prepare_summary(prepare_corpus(o));
  EXPECT_NE(text.find("input:     " + corpus_dir_ + "\n"), std::string::npos) << text;
}

TEST_F(PrepareTest, EveryShardRecordsTheTokenizerIdentity) {
  PrepareOptions o = options("identity");
  o.vocab_size = 400;
  o.shard_size = 2000;  // several numbered shards
  const PrepareSummary summary = prepare_corpus(o);
  ASSERT_GT(summary.train_shards.size(), 1u);
  const TokenizerIdentity expected = tokenizer_identity_of(dir_.file("identity/tokenizer.model"));
  EXPECT_EQ(expected.kind, "sentencepiece");
  EXPECT_EQ(expected.vocab_size, 400);
  EXPECT_EQ(expected.sha256.size(), 64u);
  for (const auto* shards : {&summary.train_shards, &summary.valid_shards})
    for (const std::string& shard : *shards) {
      const TokenShardHeader header = read_token_shard_header(token_shard_paths(shard).json);
      ASSERT_TRUE(header.tokenizer_identity.has_value()) << shard;
      EXPECT_EQ(*header.tokenizer_identity, expected) << shard;
    }
  // Megatron: the sidecar beside each .bin/.idx, which the dataset reads its tokenizer from.
  o.output_dir = dir_.file("identity_megatron");
  o.output_format = "megatron";
  o.shard_size = 0;
  prepare_corpus(o);
  for (const char* split : {"train", "valid"}) {
    const std::vector<RecordedTokenizer> recorded =
        read_recorded_tokenizers(dir_.file("identity_megatron/") + split, TokenFormat::kMegatron);
    ASSERT_EQ(recorded.size(), 1u);
    EXPECT_EQ(recorded[0].file, dir_.file("identity_megatron/") + split + ".tokenizer.json");
    ASSERT_TRUE(recorded[0].identity.has_value());
    // The same model file (copied beside the shards) has the same identity.
    EXPECT_EQ(recorded[0].identity->sha256, tokenizer_identity_of(dir_.file("identity_megatron/tokenizer.model")).sha256);
    EXPECT_EQ(MegatronIndexedDataset(dir_.file("identity_megatron/") + split, 400).tokenizer_spec(),
              dir_.file("identity_megatron/tokenizer.model"));
  }
  // A later run in another format removes the sidecars with the Megatron files.
  o.output_format = "moe4d";
  prepare_corpus(o);
  EXPECT_FALSE(fs::exists(dir_.file("identity_megatron/train.tokenizer.json")));
}

}  // namespace
}  // namespace moe4d
