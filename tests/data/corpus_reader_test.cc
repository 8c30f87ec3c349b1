// tests/data/corpus_reader_test.cc — corpus file discovery, '%' documents and the UTF-8 check.
#include "data/corpus_reader.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "data_test_util.h"

namespace moe4d {
namespace {

namespace fs = std::filesystem;
using test::expect_error;

TEST(SplitDocuments, SeparatesAtPercentLinesAndDropsBlankDocuments) {
  EXPECT_EQ(split_documents("one\nline two\n%\nthree\n%\n"), (std::vector<std::string>{"one\nline two\n", "three\n"}));
  EXPECT_EQ(split_documents("a\r\n%\r\nb"), (std::vector<std::string>{"a\r\n", "b"}));
  EXPECT_EQ(split_documents("%\n \n\t\n%\n%\nx 100%\n%% not a separator\n"),
            (std::vector<std::string>{"x 100%\n%% not a separator\n"}));
  EXPECT_EQ(split_documents("plain text without separators\n"),
            (std::vector<std::string>{"plain text without separators\n"}));
  EXPECT_TRUE(split_documents("").empty());
  EXPECT_TRUE(split_documents("%\n%\n").empty());
}

TEST(ListCorpusFiles, SkipsDatFilesSymlinksAndHiddenNames) {
  test::TempDir dir;
  fs::create_directories(dir.file("sub"));
  fs::create_directories(dir.file(".git"));
  test::write_file(dir.file("b"), "b\n");
  test::write_file(dir.file("a"), "a\n");
  test::write_file(dir.file("a.dat"), "index");
  test::write_file(dir.file(".hidden"), "h\n");
  test::write_file(dir.file(".git/config"), "c\n");
  test::write_file(dir.file("sub/c.txt"), "c\n");
  fs::create_symlink(dir.file("a"), dir.file("a.u8"));
  std::vector<std::string> files = list_corpus_files({dir.path()});
  EXPECT_EQ(files, (std::vector<std::string>{dir.file("a"), dir.file("b"), dir.file("sub/c.txt")}));
  // Explicit files are taken as given, symlinks included; duplicates are dropped.
  files = list_corpus_files({dir.file("a.u8"), dir.path(), dir.file("b")});
  EXPECT_EQ(files, (std::vector<std::string>{dir.file("a.u8"), dir.file("a"), dir.file("b"), dir.file("sub/c.txt")}));
}

TEST(ListCorpusFiles, Errors) {
  test::TempDir dir;
  expect_error([&] { list_corpus_files({dir.file("missing")}); }, {dir.file("missing"), "does not exist"});
  expect_error([&] { list_corpus_files({}); }, {"no corpus inputs"});
  test::write_file(dir.file("only.dat"), "x");
  expect_error([&] { list_corpus_files({dir.path()}); }, {"no corpus files found in " + dir.path()});
}

TEST(FindInvalidUtf8, AcceptsValidRejectsMalformed) {
  EXPECT_EQ(find_invalid_utf8("plain ascii"), -1);
  EXPECT_EQ(find_invalid_utf8("Grüße 世界 😀"), -1);
  EXPECT_EQ(find_invalid_utf8("ab\xff"), 2);
  EXPECT_EQ(find_invalid_utf8("a\xc3"), 1);                // truncated sequence
  EXPECT_EQ(find_invalid_utf8("a\xc0\xaf"), 1);            // overlong '/'
  EXPECT_EQ(find_invalid_utf8("\xed\xa0\x80"), 0);         // UTF-16 surrogate
  EXPECT_EQ(find_invalid_utf8("ok\xe4\xb8\x96x\x80"), 6);  // stray continuation byte
}

}  // namespace
}  // namespace moe4d
