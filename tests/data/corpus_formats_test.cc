// tests/data/corpus_formats_test.cc — the corpus readers: separators, JSONL (good and bad lines),
// gzip / xz / zstd (whole, concatenated, corrupt, truncated), binary files, include/exclude globs.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "data/compressed_reader.h"
#include "data/corpus_document_stream.h"
#include "data/corpus_reader.h"
#include "data_test_util.h"

namespace moe4d {
namespace {

namespace fs = std::filesystem;
using test::expect_error;
using test::TempDir;

std::vector<std::string> read_documents(const std::vector<std::string>& files, CorpusFormatOptions options = {},
                                        CorpusCounts* counts = nullptr) {
  CorpusDocumentStream stream(files, options);
  std::vector<std::string> documents;
  for (std::string d; stream.next(d);) documents.push_back(d);
  if (counts) *counts = stream.counts();
  return documents;
}

std::string decompress_all(const std::string& path) {
  std::unique_ptr<ByteReader> reader = open_byte_reader(path);
  std::string out;
  char buffer[7];  // a tiny buffer exercises the decoders' partial-output paths
  for (size_t n; (n = reader->read(buffer, sizeof buffer)) > 0;) out.append(buffer, n);
  return out;
}

// Compresses `path` with the system tool (gzip -c, xz -c, zstd -c) into `path + ext`.
std::string compress(const std::string& path, const std::string& tool, const std::string& ext) {
  const std::string out = path + ext;
  const std::string command = tool + " -q -c '" + path + "' > '" + out + "'";
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  return out;
}

TEST(TextSeparators, EveryKindAndTheDefaults) {
  TempDir dir;
  const std::string text = "one\nstill one\n\n\ntwo\n%\nthree\n \nfour\n";
  test::write_file(dir.file("a.txt"), text);
  test::write_file(dir.file("fortunes"), text);
  // .txt: blank-line blocks (a line of spaces is blank); others: '%' lines.
  EXPECT_EQ(read_documents({dir.file("a.txt")}),
            (std::vector<std::string>{"one\nstill one\n", "two\n%\nthree\n", "four\n"}));
  EXPECT_EQ(read_documents({dir.file("fortunes")}),
            (std::vector<std::string>{"one\nstill one\n\n\ntwo\n", "three\n \nfour\n"}));
  CorpusFormatOptions o;
  o.separator = DocumentSeparator::parse("line");
  EXPECT_EQ(read_documents({dir.file("a.txt")}, o),
            (std::vector<std::string>{"one\n", "still one\n", "two\n", "%\n", "three\n", "four\n"}));
  o.separator = DocumentSeparator::parse("none");
  EXPECT_EQ(read_documents({dir.file("a.txt")}, o), (std::vector<std::string>{text}));
  o.separator = DocumentSeparator::parse("percent");
  EXPECT_EQ(read_documents({dir.file("a.txt")}, o).size(), 2u);
  test::write_file(dir.file("b.txt"), "a\r\n<|endoftext|>\r\nb\n<|endoftext|>\n<|endoftext|>\n");
  o.separator = DocumentSeparator::parse("<|endoftext|>");
  EXPECT_EQ(read_documents({dir.file("b.txt")}, o), (std::vector<std::string>{"a\r\n", "b\n"}));
  expect_error([] { DocumentSeparator::parse(""); }, {"document separator is empty"});
}

TEST(Jsonl, DocumentsOtherKeysIgnoredBadLinesNamedOrSkipped) {
  TempDir dir;
  test::write_file(dir.file("good.jsonl"),
                   "{\"text\": \"first doc\\nline 2\", \"meta\": {\"x\": 1}}\n\n{\"id\": 7, \"text\": \"second\"}\n"
                   "{\"text\": \"\"}\n{\"text\": \"no newline at end\"}");
  EXPECT_EQ(read_documents({dir.file("good.jsonl")}),
            (std::vector<std::string>{"first doc\nline 2", "second", "no newline at end"}));
  CorpusFormatOptions key;
  key.json_key = "content";
  test::write_file(dir.file("content.ndjson"), "{\"content\": \"c\", \"text\": \"t\"}\n");
  EXPECT_EQ(read_documents({dir.file("content.ndjson")}, key), (std::vector<std::string>{"c"}));

  test::write_file(dir.file("bad.jsonl"),
                   "{\"text\": \"ok\"}\nnot json\n[1, 2]\n{\"meta\": 1}\n{\"text\": 5}\n{\"text\": \"ok 2\"}\n");
  expect_error([&] { read_documents({dir.file("bad.jsonl")}); },
               {dir.file("bad.jsonl") + ":2:", "not valid JSON", "--skip-bad-lines"});
  CorpusFormatOptions skip;
  skip.skip_bad_lines = true;
  CorpusCounts counts;
  EXPECT_EQ(read_documents({dir.file("bad.jsonl")}, skip, &counts), (std::vector<std::string>{"ok", "ok 2"}));
  EXPECT_EQ(counts.bad_lines, 4);
  // Each kind of bad line is named.
  test::write_file(dir.file("no_key.jsonl"), "{\"meta\": 1}\n");
  expect_error([&] { read_documents({dir.file("no_key.jsonl")}); }, {"no_key.jsonl:1:", "no \"text\" key"});
  test::write_file(dir.file("number.jsonl"), "{\"text\": 5}\n");
  expect_error([&] { read_documents({dir.file("number.jsonl")}); }, {"number.jsonl:1:", "not a string"});
  // --format jsonl forces it for any name; the text format reads JSON as text.
  test::write_file(dir.file("data.dump"), "{\"text\": \"x\"}\n");
  CorpusFormatOptions forced;
  forced.format = "jsonl";
  EXPECT_EQ(read_documents({dir.file("data.dump")}, forced), (std::vector<std::string>{"x"}));
  forced.format = "xml";
  expect_error([&] { read_documents({dir.file("data.dump")}, forced); }, {"\"xml\"", "auto, text or jsonl"});
}

TEST(Compressed, GzipXzZstdReadAsTheirContents) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 3000; ++i) text += fmt::format("line {} of a compressible corpus\n\n", i);
  test::write_file(dir.file("c.txt"), text);
  for (auto [tool, ext] : {std::pair{"gzip", ".gz"}, {"xz", ".xz"}, {"zstd", ".zst"}}) {
    const std::string packed = compress(dir.file("c.txt"), tool, ext);
    EXPECT_EQ(decompress_all(packed), text) << tool;
    EXPECT_EQ(read_documents({packed}).size(), 3000u) << tool;  // .txt inside: blank-line documents
  }
  // Concatenated members / frames are one stream, as gzip -d and zstd -d read them.
  for (auto [tool, ext] : {std::pair{"gzip", ".gz"}, {"zstd", ".zst"}, {"xz", ".xz"}}) {
    const std::string one = compress(dir.file("c.txt"), tool, ext);
    test::write_file(dir.file("twice") + ext, test::read_file(one) + test::read_file(one));
    EXPECT_EQ(decompress_all(dir.file("twice") + ext), text + text) << tool;
  }
  // The format inside is chosen by the inner extension.
  test::write_file(dir.file("j.jsonl"), "{\"text\": \"zipped json\"}\n");
  EXPECT_EQ(read_documents({compress(dir.file("j.jsonl"), "zstd", ".zst")}), (std::vector<std::string>{"zipped json"}));
}

TEST(Compressed, CorruptAndTruncatedStreamsAreErrorsNamingTheFile) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 5000; ++i) text += fmt::format("{} some text that compresses {}\n", i, i * 7919 % 1000);
  test::write_file(dir.file("c.txt"), text);
  for (auto [tool, ext, name] :
       {std::tuple{"gzip", ".gz", "gzip"}, {"xz", ".xz", "xz"}, {"zstd", ".zst", "zstd"}}) {
    const std::string packed = test::read_file(compress(dir.file("c.txt"), tool, ext));
    const std::string truncated = dir.file("truncated") + ext;
    test::write_file(truncated, packed.substr(0, packed.size() / 2));
    expect_error([&] { decompress_all(truncated); }, {truncated, std::string("truncated ") + name});
    std::string flipped = packed;
    for (size_t i = flipped.size() / 3; i < flipped.size() / 3 + 16; ++i) flipped[i] ^= 0x5A;
    const std::string corrupt = dir.file("corrupt") + ext;
    test::write_file(corrupt, flipped);
    expect_error([&] { decompress_all(corrupt); }, {corrupt, std::string("corrupt or truncated ") + name});
    // Not that format at all.
    const std::string fake = dir.file("fake") + ext;
    test::write_file(fake, "plain text, not compressed\n");
    expect_error([&] { decompress_all(fake); }, {fake, std::string("is not ") + name + " data"});
  }
}

TEST(CorpusFiles, BinaryFilesAreSkippedAndCounted) {
  TempDir dir;
  fs::create_directories(dir.file("c"));
  test::write_file(dir.file("c/text.txt"), "hello\n");
  test::write_file(dir.file("c/image.png"), std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16));
  test::write_file(dir.file("c/packed.bin"), std::string("abc\0def", 7));
  CorpusCounts counts;
  EXPECT_EQ(read_documents(list_corpus_files({dir.file("c")}), {}, &counts), (std::vector<std::string>{"hello\n"}));
  EXPECT_EQ(counts.binary_files, 2);
  EXPECT_EQ(counts.files, 1);
}

TEST(CorpusFiles, IncludeAndExcludeGlobs) {
  TempDir dir;
  for (const char* f : {"a.jsonl", "b.txt", "sub/c.jsonl", "sub/deep/d.jsonl.gz", "sub/skip.jsonl", "e.md"}) {
    fs::create_directories(fs::path(dir.file(f)).parent_path());
    test::write_file(dir.file(f), "x\n");
  }
  auto names = [&](const CorpusFileFilter& filter) {
    std::vector<std::string> out;
    for (const std::string& f : list_corpus_files({dir.path()}, filter))
      out.push_back(fs::relative(f, dir.path()).generic_string());
    return out;
  };
  EXPECT_EQ(names({}).size(), 6u);
  EXPECT_EQ(names({.include = {"*.jsonl"}}), (std::vector<std::string>{"a.jsonl", "sub/c.jsonl", "sub/skip.jsonl"}));
  EXPECT_EQ(names({.include = {"*.jsonl", "*.jsonl.gz"}, .exclude = {"skip*"}}),
            (std::vector<std::string>{"a.jsonl", "sub/c.jsonl", "sub/deep/d.jsonl.gz"}));
  // A pattern with '/' matches the path relative to the input directory.
  EXPECT_EQ(names({.include = {"sub/*"}, .exclude = {"sub/deep/*"}}),
            (std::vector<std::string>{"sub/c.jsonl", "sub/skip.jsonl"}));
  EXPECT_EQ(names({.exclude = {"*.jsonl*"}}), (std::vector<std::string>{"b.txt", "e.md"}));
  // A file named directly is always read.
  EXPECT_EQ(list_corpus_files({dir.file("a.jsonl")}, {.exclude = {"*"}}).size(), 1u);
  expect_error([&] { list_corpus_files({dir.path()}, {.include = {"*.parquet"}}); },
               {"no corpus files found", "--include/--exclude"});
}

}  // namespace
}  // namespace moe4d
