// tests/data/tokenizer_identity_test.cc — tokenizer identities: their JSON form in shard headers,
// what token files record, and the agreement check that `moe4d train` runs before it starts.
#include "data/tokenizer_identity.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "data/data_check.h"
#include "data/megatron_indexed_dataset.h"
#include "data/prepare.h"
#include "data/token_shard_writer.h"
#include "data/tokenizer_record.h"
#include "data_test_util.h"
#include "fortunes_sample.h"

namespace moe4d {
namespace {

namespace fs = std::filesystem;
using test::expect_error;

TEST(TokenizerIdentity, JsonRoundTripAndRefusals) {
  const TokenizerIdentity bytes = tokenizer_identity_of("bytes");
  EXPECT_EQ(bytes, (TokenizerIdentity{"bytes", "", 257}));
  EXPECT_EQ(bytes.describe(), "bytes, 257 ids");
  EXPECT_EQ(parse_tokenizer_identity(tokenizer_identity_json(bytes), "h"), bytes);
  const TokenizerIdentity sp{"sentencepiece", std::string(64, 'a'), 4096};
  EXPECT_EQ(parse_tokenizer_identity(tokenizer_identity_json(sp), "h"), sp);
  EXPECT_EQ(sp.describe(), "sentencepiece, 4096 ids, model sha256 aaaaaaaaaaaa");
  expect_error([] { parse_tokenizer_identity(nlohmann::json{{"kind", "wordpiece"}, {"vocab_size", 3}}, "h.json"); },
               {"h.json", "kind", "\"wordpiece\""});
  expect_error([] { parse_tokenizer_identity(nlohmann::json{{"kind", "sentencepiece"}, {"vocab_size", 3}}, "h"); },
               {"lacks \"sha256\""});
  expect_error([] { parse_tokenizer_identity(nlohmann::json{{"kind", "bytes"}, {"vocab_size", 0}}, "h"); },
               {"vocab_size is 0"});
  expect_error([] { parse_tokenizer_identity(nlohmann::json{{"kind", "bytes"}, {"vocab_size", 257}, {"x", 1}}, "h"); },
               {"unknown key \"x\""});
}

TEST(TokenizerIdentity, ShardHeadersWithAndWithout) {
  test::TempDir dir;
  const std::vector<int> ids = {1, 2, 256};
  write_token_shard(dir.file("new"), ids, 257, "bytes", 1, tokenizer_identity_of("bytes"));
  write_token_shard(dir.file("old"), ids, 257, "bytes", 1);  // as shards were written before
  EXPECT_EQ(read_token_shard_header(dir.file("new.json")).tokenizer_identity, tokenizer_identity_of("bytes"));
  EXPECT_FALSE(read_token_shard_header(dir.file("old.json")).tokenizer_identity.has_value());
  const auto recorded = read_recorded_tokenizers(dir.file("new.bin"), TokenFormat::kMoe4d);
  ASSERT_EQ(recorded.size(), 1u);
  EXPECT_EQ(recorded[0].file, dir.file("new.json"));
  EXPECT_EQ(recorded[0].spec, "bytes");
}

TEST(TokenizerIdentity, MegatronSidecar) {
  test::TempDir dir;
  const std::vector<int> ids = {1, 2, 256};
  for (const char* prefix : {"theirs", "ours"}) {  // "theirs" as Megatron writes it: no sidecar
    MegatronIndexedDatasetWriter writer(dir.file(prefix), 257);
    writer.add_document(ids);
    writer.finish();
  }
  write_megatron_tokenizer_sidecar(dir.file("ours"), "bytes", tokenizer_identity_of("bytes"));
  auto theirs = read_recorded_tokenizers(dir.file("theirs"), TokenFormat::kMegatron);
  ASSERT_EQ(theirs.size(), 1u);
  EXPECT_EQ(theirs[0].file, dir.file("theirs.idx"));
  EXPECT_FALSE(theirs[0].identity.has_value());
  auto ours = read_recorded_tokenizers(dir.file("ours.bin"), TokenFormat::kMegatron);
  ASSERT_EQ(ours.size(), 1u);
  EXPECT_EQ(ours[0].file, dir.file("ours.tokenizer.json"));
  EXPECT_EQ(ours[0].identity, tokenizer_identity_of("bytes"));
  EXPECT_EQ(MegatronIndexedDataset(dir.file("ours"), 257).tokenizer_spec(), "bytes");
  EXPECT_EQ(MegatronIndexedDataset(dir.file("theirs"), 257).tokenizer_spec(), "");
  test::write_file(dir.file("ours.tokenizer.json"), "{\"format\": \"something else\"}");
  expect_error([&] { read_recorded_tokenizers(dir.file("ours"), TokenFormat::kMegatron); },
               {"tokenizer sidecar " + dir.file("ours.tokenizer.json"), "moe4d-tokenizer-sidecar"});
}

// Two corpora tokenized with BPE tokenizers of 300 and 500 ids, and one with bytes.
class TokenizerAgreementTest : public ::testing::Test {
 protected:
  void SetUp() override {
    test::write_file(dir_.file("corpus.txt"), test::kFortunesSample);
    for (int vocab : {400, 500}) prepare(std::to_string(vocab), "bpe", vocab);
    prepare("bytes", "bytes", 0);
  }
  void prepare(const std::string& out, const std::string& tokenizer, int vocab) {
    PrepareOptions o;
    o.inputs = {dir_.file("corpus.txt")};
    o.output_dir = dir_.file(out);
    o.tokenizer = tokenizer;
    if (vocab > 0) o.vocab_size = vocab;
    o.valid_fraction = 0.2;
    prepare_corpus(o);
  }
  std::vector<TokenSourceRef> sources(const std::string& train, const std::string& valid) const {
    return {{"data.train", dir_.file(train + "/train.bin"), TokenFormat::kMoe4d},
            {"data.valid", dir_.file(valid + "/valid.bin"), TokenFormat::kMoe4d}};
  }
  test::TempDir dir_;
};

TEST_F(TokenizerAgreementTest, OneTokenizerPasses) {
  const TokenizerAgreement a = check_tokenizer_agreement("c.yaml", sources("400", "400"), dir_.file("400/tokenizer.model"));
  ASSERT_TRUE(a.identity.has_value());
  EXPECT_EQ(a.identity->vocab_size, 400);
  EXPECT_TRUE(a.unrecorded.empty());
  // Without data.tokenizer: the one the train header names.
  const TokenizerAgreement b = check_tokenizer_agreement("c.yaml", sources("400", "400"), "");
  EXPECT_EQ(b.spec, dir_.file("400/tokenizer.model"));
  EXPECT_EQ(b.identity, a.identity);
}

TEST_F(TokenizerAgreementTest, EachMismatchNamesBothSides) {
  expect_error([&] { check_tokenizer_agreement("c.yaml", sources("400", "400"), dir_.file("500/tokenizer.model")); },
               {"c.yaml: tokenizer mismatch: data.train " + dir_.file("400/train.json") +
                    " was made with tokenizer (sentencepiece, 400 ids",
                "but data.tokenizer " + dir_.file("500/tokenizer.model") + " is (sentencepiece, 500 ids"});
  expect_error([&] { check_tokenizer_agreement("c.yaml", sources("500", "400"), ""); },
               {"data.valid " + dir_.file("400/valid.json") + " was made with tokenizer (sentencepiece, 400 ids",
                "but data.train " + dir_.file("500/train.json") + " was made with (sentencepiece, 500 ids"});
  expect_error([&] { check_tokenizer_agreement("c.yaml", sources("bytes", "bytes"), dir_.file("400/tokenizer.model")); },
               {"(bytes, 257 ids)", "(sentencepiece, 400 ids"});
  // The model file a header names was replaced after the shards were written.
  fs::copy_file(dir_.file("500/tokenizer.model"), dir_.file("400/tokenizer.model"), fs::copy_options::overwrite_existing);
  expect_error([&] { check_tokenizer_agreement("c.yaml", sources("400", "400"), ""); },
               {"the tokenizer " + dir_.file("400/tokenizer.model") + " that " + dir_.file("400/train.json") + " names"});
}

TEST_F(TokenizerAgreementTest, OlderHeadersAreListedNotRefused) {
  for (const char* split : {"train", "valid"}) {
    const std::string path = dir_.file(std::string("400/") + split + ".json");
    nlohmann::json header = nlohmann::json::parse(test::read_file(path));
    header.erase("tokenizer_identity");
    test::write_file(path, header.dump(2));
  }
  const TokenizerAgreement a = check_tokenizer_agreement("c.yaml", sources("400", "400"), dir_.file("400/tokenizer.model"));
  EXPECT_EQ(a.unrecorded, (std::vector<std::string>{dir_.file("400/train.json"), dir_.file("400/valid.json")}));
  const std::string warning = unrecorded_tokenizer_warning(a.unrecorded);
  EXPECT_NE(warning.find("2 token files record no tokenizer identity (" + dir_.file("400/train.json") + " and 1 more)"),
            std::string::npos)
      << warning;
  EXPECT_EQ(unrecorded_tokenizer_warning({}), "");
}

}  // namespace
}  // namespace moe4d
