// tests/data/prepare_streaming_test.cc — prepare_corpus on the new inputs and outputs: document
// boundaries through JSONL and compressed files, the validation split and its minimum count rule,
// tokenizer reuse, shards, workers, skipped binary files and bad lines.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <set>

#include "data/prepare.h"
#include "data/token_dataset.h"
#include "data/token_source.h"
#include "data/tokenizer.h"
#include "data_test_util.h"

namespace moe4d {
namespace {

namespace fs = std::filesystem;
using test::expect_error;
using test::TempDir;

std::vector<std::string> decode_documents(const TokenSource& source, const Tokenizer& tokenizer) {
  std::vector<int32_t> ids(size_t(source.num_tokens()));
  source.read(0, source.num_tokens(), ids.data());
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
  EXPECT_TRUE(current.empty()) << "the last document does not end with the end-of-sequence id";
  return documents;
}

class PrepareStreamingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir_.file("c"));
    std::string jsonl;
    for (int i = 0; i < 300; ++i) {
      documents_.push_back(fmt::format("doc {}: {}\nsecond line {}", i, std::string(size_t(i % 13), 'a' + i % 26), i));
      jsonl += nlohmann_free_json(documents_.back()) + "\n";
    }
    test::write_file(dir_.file("c/docs.jsonl"), jsonl);
  }
  // {"text": "<escaped>", "meta": 1} without a JSON library.
  static std::string nlohmann_free_json(const std::string& text) {
    std::string escaped;
    for (char c : text) escaped += c == '\n' ? std::string("\\n") : std::string(1, c);
    return "{\"meta\": 1, \"text\": \"" + escaped + "\"}";
  }
  PrepareOptions options(const std::string& out) const {
    PrepareOptions o;
    o.inputs = {dir_.file("c")};
    o.output_dir = dir_.file(out);
    o.tokenizer = "bytes";
    o.valid_fraction = 0.1;
    return o;
  }
  TempDir dir_;
  std::vector<std::string> documents_;
};

TEST_F(PrepareStreamingTest, JsonlDocumentBoundariesAndSplitByDocument) {
  PrepareSummary s = prepare_corpus(options("out"));
  EXPECT_EQ(s.documents, 300);
  EXPECT_EQ(s.train_documents + s.valid_documents, 300);
  EXPECT_GT(s.valid_documents, 15);  // hash draw at 10%
  EXPECT_LT(s.valid_documents, 50);
  EXPECT_TRUE(s.split_note.empty());
  auto tokenizer = load_tokenizer("bytes");
  auto train = open_token_source(s.train_path, TokenFormat::kMoe4d, 257);
  auto valid = open_token_source(s.valid_path, TokenFormat::kMoe4d, 257);
  std::vector<std::string> a = decode_documents(*train, *tokenizer), b = decode_documents(*valid, *tokenizer);
  EXPECT_EQ(int64_t(a.size()), s.train_documents);
  EXPECT_EQ(int64_t(b.size()), s.valid_documents);
  // Every JSON text is exactly one document (the "meta" key is not tokenized), in corpus order.
  std::vector<std::string> merged;
  size_t i = 0, j = 0;
  for (const std::string& d : documents_) {
    if (i < a.size() && a[i] == d) merged.push_back(a[i++]);
    else if (j < b.size() && b[j] == d) merged.push_back(b[j++]);
  }
  EXPECT_EQ(merged, documents_);
  EXPECT_NE(format_prepare_summary(s).find("tokens/s"), std::string::npos);
}

TEST_F(PrepareStreamingTest, SmallCorpusMinimumCountRuleIsStated) {
  test::write_file(dir_.file("two.txt"), "first document\n\nsecond document\n");
  PrepareOptions o = options("two");
  o.inputs = {dir_.file("two.txt")};
  PrepareSummary s = prepare_corpus(o);
  EXPECT_EQ(s.valid_documents, 1);
  EXPECT_EQ(s.train_documents, 1);
  EXPECT_NE(s.split_note.find("1 of 2 documents (50%)"), std::string::npos) << s.split_note;
  EXPECT_NE(format_prepare_summary(s).find("warning:   the validation split holds 1 of 2"), std::string::npos);
  // More held out on request; never all of it.
  test::write_file(dir_.file("five.txt"), "a\n\nb\n\nc\n\nd\n\ne\n");
  o.inputs = {dir_.file("five.txt")};
  o.min_valid_documents = 2;
  EXPECT_EQ(prepare_corpus(o).valid_documents, 2);
  o.min_valid_documents = 5;
  expect_error([&] { prepare_corpus(o); }, {"5 documents", "--min-valid-documents"});
  // A large enough corpus is split by the draw alone: no note.
  PrepareSummary big = prepare_corpus(options("big"));
  EXPECT_TRUE(big.split_note.empty());
}

TEST_F(PrepareStreamingTest, WorkersAndShardsChangeNoToken) {
  PrepareSummary one = prepare_corpus(options("one"));
  PrepareOptions o = options("two_workers");
  o.workers = 2;
  prepare_corpus(o);
  for (const char* f : {"train.bin", "train.json", "valid.bin", "valid.json"})
    EXPECT_EQ(test::read_file(dir_.file("one/") + f), test::read_file(dir_.file("two_workers/") + f)) << f;
  o = options("sharded");
  o.shard_size = 2000;
  o.workers = 3;
  PrepareSummary sharded = prepare_corpus(o);
  EXPECT_GT(sharded.train_shards.size(), 3u);
  EXPECT_EQ(sharded.train_path, dir_.file("sharded/train"));
  auto whole = open_token_source(one.train_path, TokenFormat::kMoe4d, 257);
  auto parts = open_token_source(sharded.train_path, TokenFormat::kMoe4d, 257);
  ASSERT_EQ(parts->num_tokens(), whole->num_tokens());
  EXPECT_EQ(parts->num_documents(), whole->num_documents());
  std::vector<int32_t> a(size_t(whole->num_tokens())), b(a.size());
  whole->read(0, whole->num_tokens(), a.data());
  parts->read(0, parts->num_tokens(), b.data());
  EXPECT_EQ(a, b);
  for (const std::string& shard : sharded.train_shards) {  // documents never straddle shards
    TokenDataset d = TokenDataset::open(shard, /*verify=*/true);
    EXPECT_EQ(d.token(d.num_tokens() - 1), 256) << shard;
  }
  // Rewriting with bigger shards removes the stale numbered shards of the first run.
  o.shard_size = 1000000;
  PrepareSummary fewer = prepare_corpus(o);
  EXPECT_EQ(fewer.train_shards.size(), 1u);
  EXPECT_FALSE(fs::exists(dir_.file("sharded/train-00001.bin")));
  EXPECT_EQ(open_token_source(fewer.train_path, TokenFormat::kMoe4d, 257)->num_tokens(), whole->num_tokens());
}

TEST_F(PrepareStreamingTest, CompressedBinaryAndBadLinesThroughPrepare) {
  ASSERT_EQ(std::system(("gzip -q '" + dir_.file("c/docs.jsonl") + "'").c_str()), 0);
  test::write_file(dir_.file("c/blob.bin"), std::string("\x7f" "ELF\0\0\0", 8));
  test::write_file(dir_.file("c/bad.jsonl"), "{\"text\": \"fine\"}\n{\"txt\": \"typo\"}\n");
  expect_error([&] { prepare_corpus(options("fails")); }, {"bad.jsonl:2:", "no \"text\" key"});
  PrepareOptions o = options("skipping");
  o.format.skip_bad_lines = true;
  PrepareSummary s = prepare_corpus(o);
  EXPECT_EQ(s.documents, 301);
  EXPECT_EQ(s.bad_lines, 1);
  EXPECT_EQ(s.binary_files, 1);
  EXPECT_EQ(s.files, 2);
  EXPECT_LT(s.bytes, s.text_bytes);  // the gzip file is smaller on disk
  EXPECT_NE(format_prepare_summary(s).find("1 binary files, 1 bad JSONL lines"), std::string::npos);
}

TEST_F(PrepareStreamingTest, TokenizerModelIsReusedWithoutTraining) {
  PrepareOptions o = options("trained");
  o.tokenizer = "bpe";
  o.vocab_size = 300;
  PrepareSummary trained = prepare_corpus(o);
  EXPECT_GT(trained.tokenizer_seconds, 0);
  test::write_file(dir_.file("other.txt"), "other corpus\n\nsame tokenizer\n\n" + std::string(500, 'z') + "\n");
  PrepareOptions reuse = options("reused");
  reuse.inputs = {dir_.file("other.txt")};
  reuse.tokenizer = "bpe";
  reuse.tokenizer_model = dir_.file("trained/tokenizer.model");
  PrepareSummary s = prepare_corpus(reuse);
  EXPECT_EQ(s.tokenizer_seconds, 0);  // no training
  EXPECT_EQ(s.vocab_size, 300);
  EXPECT_EQ(test::read_file(dir_.file("reused/tokenizer.model")), test::read_file(dir_.file("trained/tokenizer.model")));
  TokenDataset shard = TokenDataset::open(s.train_path, true);
  EXPECT_EQ(shard.vocab_size(), 300);
  EXPECT_EQ(shard.tokenizer_spec(), dir_.file("reused/tokenizer.model"));
  auto tokenizer = load_tokenizer(shard.tokenizer_spec());
  std::vector<std::string> docs = decode_documents(TokenDatasetView(shard), *tokenizer);
  ASSERT_FALSE(docs.empty());
  reuse.tokenizer = "bytes";
  expect_error([&] { prepare_corpus(reuse); }, {"--tokenizer bytes and --tokenizer-model"});
  reuse.tokenizer = "bpe";
  reuse.vocab_size = 500;
  expect_error([&] { prepare_corpus(reuse); }, {"vocab size 500", "--tokenizer-model"});
  reuse.vocab_size.reset();
  reuse.tokenizer_model = dir_.file("c/docs.jsonl");
  expect_error([&] { prepare_corpus(reuse); }, {"docs.jsonl"});
}

}  // namespace
}  // namespace moe4d
