// tests/data/bpe_trainer_test.cc — BPE training on real text: round trips, byte fallback,
// determinism, seed-driven subsampling and the vocab-size errors.
#include "data/bpe_trainer.h"

#include <gtest/gtest.h>

#include "data/sentencepiece_tokenizer.h"
#include "data_test_util.h"
#include "fortunes_sample.h"

namespace moe4d {
namespace {

using test::expect_error;

class BpeTrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    corpus_ = dir_.file("corpus.txt");
    test::write_file(corpus_, test::kFortunesSample);
  }
  test::TempDir dir_;
  std::string corpus_;
};

TEST_F(BpeTrainerTest, TrainsTokenizerThatRoundTripsAndCompresses) {
  std::string model = train_bpe_tokenizer(corpus_, 400, dir_.file("tok"), 7);
  EXPECT_EQ(model, dir_.file("tok.model"));
  SentencePieceTokenizer tokenizer(model);
  EXPECT_EQ(tokenizer.vocab_size(), 400);
  EXPECT_EQ(tokenizer.eos_id(), 1);

  const std::string text = test::kFortunesSample;
  std::vector<int> ids = tokenizer.encode(text);
  EXPECT_EQ(tokenizer.decode(ids), text);
  // ~70 learned merges (400 - 258 reserved - ~73 characters) must clearly beat one token per byte,
  // and a larger vocabulary must compress further.
  EXPECT_LT(static_cast<double>(ids.size()), 0.75 * static_cast<double>(text.size()));
  SentencePieceTokenizer larger(train_bpe_tokenizer(corpus_, 700, dir_.file("tok700"), 7));
  EXPECT_LT(static_cast<double>(larger.encode(text).size()), 0.85 * static_cast<double>(ids.size()));
  for (int id : ids) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, 400);
    EXPECT_NE(id, tokenizer.eos_id());
  }

  // Characters never seen in training fall back to bytes; whitespace runs and tabs survive.
  const std::string unseen = "  Grüße\t\t世界 ☃ 😀\n\n   ASCII  art |  |\n";
  EXPECT_EQ(tokenizer.decode(tokenizer.encode(unseen)), unseen);
  std::vector<int> with_eos = tokenizer.encode("one");
  with_eos.push_back(tokenizer.eos_id());
  EXPECT_EQ(tokenizer.decode(with_eos), "one");
  expect_error([&] { tokenizer.decode(std::vector<int>{400}); }, {"token id 400", model});
}

TEST_F(BpeTrainerTest, TrainingIsDeterministic) {
  std::string a = train_bpe_tokenizer(corpus_, 450, dir_.file("a"), 3);
  std::string b = train_bpe_tokenizer(corpus_, 450, dir_.file("b"), 3);
  std::string bytes_a = test::read_file(a);
  ASSERT_FALSE(bytes_a.empty());
  EXPECT_EQ(bytes_a, test::read_file(b));
  SentencePieceTokenizer ta(a), tb(b);
  EXPECT_EQ(ta.encode(test::kFortunesSample), tb.encode(test::kFortunesSample));
}

TEST_F(BpeTrainerTest, SeedSelectsTheSubsampleOfLargeCorpora) {
  BpeTrainOptions options;
  options.max_sentences = 150;  // the sample has ~300 lines
  std::string s1 = train_bpe_tokenizer(corpus_, 360, dir_.file("s1"), 1, options);
  std::string s1_again = train_bpe_tokenizer(corpus_, 360, dir_.file("s1_again"), 1, options);
  std::string s2 = train_bpe_tokenizer(corpus_, 360, dir_.file("s2"), 2, options);
  EXPECT_EQ(test::read_file(s1), test::read_file(s1_again));
  EXPECT_NE(test::read_file(s1), test::read_file(s2));
  // Without subsampling the seed plays no part.
  std::string full1 = train_bpe_tokenizer(corpus_, 360, dir_.file("f1"), 1);
  std::string full2 = train_bpe_tokenizer(corpus_, 360, dir_.file("f2"), 2);
  EXPECT_EQ(test::read_file(full1), test::read_file(full2));
}

TEST_F(BpeTrainerTest, RejectsBadVocabSizesAndCorpora) {
  expect_error([&] { train_bpe_tokenizer(corpus_, 200, dir_.file("x"), 0); }, {"vocab size 200", "too small"});
  // Above the reserved ids but below reserved + corpus characters.
  expect_error([&] { train_bpe_tokenizer(corpus_, 270, dir_.file("x"), 0); },
               {"vocab size 270 is too small for " + corpus_, "need at least 3"});
  // Far more pieces than this small corpus can fill.
  expect_error([&] { train_bpe_tokenizer(corpus_, 60000, dir_.file("x"), 0); },
               {"vocab size 60000 is too large for " + corpus_, "at most"});
  expect_error([&] { train_bpe_tokenizer(dir_.file("missing.txt"), 400, dir_.file("x"), 0); },
               {dir_.file("missing.txt")});
  test::write_file(dir_.file("empty.txt"), "");
  expect_error([&] { train_bpe_tokenizer(dir_.file("empty.txt"), 400, dir_.file("x"), 0); },
               {dir_.file("empty.txt"), "empty"});
  EXPECT_FALSE(std::filesystem::exists(dir_.file("x.model")));
}

TEST(SplitLines, KeepsNewlines) {
  EXPECT_EQ(split_lines_keep_newlines(""), std::vector<std::string>{});
  EXPECT_EQ(split_lines_keep_newlines("a\n\nb"), (std::vector<std::string>{"a\n", "\n", "b"}));
  EXPECT_EQ(split_lines_keep_newlines("a\n"), (std::vector<std::string>{"a\n"}));
}

}  // namespace
}  // namespace moe4d
