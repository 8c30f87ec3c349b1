// tests/data/megatron_dataset_test.cc — Megatron-LM indexed datasets (.bin + .idx).
//
// The reference layout is Megatron-Core's megatron/core/datasets/indexed_dataset.py (NVIDIA/
// Megatron-LM): _IndexWriter.write / _IndexReader and IndexedDatasetBuilder. A small independent
// numpy script below writes files exactly as those functions do (header "MMIDIDX\0\0", <Q version
// 1, <B dtype code, <Q sequence count, <Q document-index count, int32 lengths, int64 byte
// pointers, int64 document indices), including documents of several sequences; moe4d must read
// them, and moe4d's own writer must produce the same bytes as the script for the same documents.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "data/megatron_indexed_dataset.h"
#include "data/prepare.h"
#include "data/token_dataset.h"
#include "data/token_source.h"
#include "data_test_util.h"

namespace moe4d {
namespace {

namespace fs = std::filesystem;
using test::expect_error;
using test::TempDir;

// Writes <prefix>.bin/.idx like IndexedDatasetBuilder(add_document(...), finalize) with numpy.
void write_with_numpy(const std::string& prefix, const std::string& dtype, const std::string& documents_py) {
  const std::string script = R"PY(
import struct, sys, numpy
prefix, dtype_name, docs = sys.argv[1], sys.argv[2], eval(sys.argv[3])
codes = {"uint8": 1, "int8": 2, "int16": 3, "int32": 4, "int64": 5, "float64": 6, "float32": 7, "uint16": 8}
dtype = getattr(numpy, dtype_name)
lengths, doc_idx = [], [0]
with open(prefix + ".bin", "wb") as b:
    for doc in docs:                 # a document is a list of sequences
        for seq in doc:
            b.write(numpy.array(seq, dtype=dtype).tobytes(order="C"))
            lengths.append(len(seq))
        doc_idx.append(len(lengths))
pointers, p = [], 0
for n in lengths:
    pointers.append(p)
    p += n * numpy.dtype(dtype).itemsize
with open(prefix + ".idx", "wb") as f:
    f.write(b"MMIDIDX\x00\x00")
    f.write(struct.pack("<Q", 1))
    f.write(struct.pack("<B", codes[dtype_name]))
    f.write(struct.pack("<Q", len(lengths)))
    f.write(struct.pack("<Q", len(doc_idx)))
    f.write(numpy.array(lengths, dtype=numpy.int32).tobytes(order="C"))
    f.write(numpy.array(pointers, dtype=numpy.int64).tobytes(order="C"))
    f.write(numpy.array(doc_idx, dtype=numpy.int64).tobytes(order="C"))
)PY";
  const std::string script_path = prefix + "_writer.py";
  test::write_file(script_path, script);
  // Debian's interpreter, which has python3-numpy (scripts/setup.sh), whatever python3 PATH finds first.
  const std::string command = "/usr/bin/python3 '" + script_path + "' '" + prefix + "' " + dtype + " '" + documents_py + "'";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
}

std::vector<int32_t> all_tokens(const TokenSource& source) {
  std::vector<int32_t> ids(size_t(source.num_tokens()));
  source.read(0, source.num_tokens(), ids.data());
  return ids;
}

TEST(MegatronIndexedDataset, ReadsTheLayoutMegatronCoreWrites) {
  TempDir dir;
  // Three documents; the first holds two sequences (sentences), as preprocess_data.py --split-sentences writes.
  write_with_numpy(dir.file("m32"), "int32", "[[[5, 6, 7], [8]], [[9, 10]], [[70000, 1, 2, 0]]]");
  MegatronIndexedDataset m(dir.file("m32"), 100000);
  EXPECT_EQ(m.dtype_code(), 4);
  EXPECT_EQ(m.num_sequences(), 4);
  EXPECT_EQ(m.num_documents(), 3);
  EXPECT_EQ(m.num_tokens(), 10);
  EXPECT_EQ(m.sequence_length(0), 3);
  EXPECT_EQ(m.sequence_pointer(3), 6 * 4);
  EXPECT_EQ(m.document_index(1), 2);
  EXPECT_EQ(m.document_index(3), 4);
  EXPECT_EQ(all_tokens(m), (std::vector<int32_t>{5, 6, 7, 8, 9, 10, 70000, 1, 2, 0}));
  // Ids are checked against the model's vocabulary on read.
  MegatronIndexedDataset small_vocab(dir.file("m32.bin"), 1000);
  std::vector<int32_t> out(10);
  expect_error([&] { small_vocab.read(0, 10, out.data()); }, {"m32.bin", "token 6 is id 70000", "[0, 1000)"});

  for (const char* dtype : {"uint16", "uint8", "int16", "int64"}) {
    write_with_numpy(dir.file(dtype), dtype, "[[[1, 2, 3]], [[4, 5]]]");
    MegatronIndexedDataset d(dir.file(dtype) + ".idx", 64);
    EXPECT_EQ(all_tokens(d), (std::vector<int32_t>{1, 2, 3, 4, 5})) << dtype;
  }
  write_with_numpy(dir.file("f32"), "float32", "[[[1, 2]]]");
  expect_error([&] { MegatronIndexedDataset(dir.file("f32"), 64); }, {"f32.idx", "floating-point"});
}

TEST(MegatronIndexedDataset, WriterMatchesMegatronByteForByte) {
  TempDir dir;
  {
    MegatronIndexedDatasetWriter w(dir.file("ours"), 1000);  // < 65500 ids: uint16, as optimal_dtype picks
    w.add_document(std::vector<int>{3, 4, 999});
    w.add_document(std::vector<int>{1});
    w.add_document(std::vector<int>{7, 8});
    w.finish();
  }
  write_with_numpy(dir.file("ref"), "uint16", "[[[3, 4, 999]], [[1]], [[7, 8]]]");
  EXPECT_EQ(test::read_file(dir.file("ours.idx")), test::read_file(dir.file("ref.idx")));
  EXPECT_EQ(test::read_file(dir.file("ours.bin")), test::read_file(dir.file("ref.bin")));
  {
    MegatronIndexedDatasetWriter w(dir.file("big"), 100000);  // >= 65500 ids: int32
    w.add_document(std::vector<int>{70000, 2});
    w.finish();
  }
  write_with_numpy(dir.file("big_ref"), "int32", "[[[70000, 2]]]");
  EXPECT_EQ(test::read_file(dir.file("big.idx")), test::read_file(dir.file("big_ref.idx")));
  MegatronIndexedDatasetWriter bad(dir.file("bad"), 10);
  expect_error([&] { bad.add_document(std::vector<int>{10}); }, {"token id 10", "[0, 10)"});
}

TEST(MegatronIndexedDataset, DamagedIndexesAreClearErrors) {
  TempDir dir;
  write_with_numpy(dir.file("ok"), "uint16", "[[[1, 2, 3]], [[4, 5]]]");
  const std::string idx = test::read_file(dir.file("ok.idx"));
  auto variant = [&](const std::string& name, const std::string& idx_bytes, const std::string& bin_bytes) {
    test::write_file(dir.file(name) + ".idx", idx_bytes);
    test::write_file(dir.file(name) + ".bin", bin_bytes);
    return dir.file(name);
  };
  const std::string bin = test::read_file(dir.file("ok.bin"));
  expect_error([&] { MegatronIndexedDataset(variant("magic", "XXIDIDX" + idx.substr(7), bin), 64); },
               {"magic.idx", "bad magic"});
  std::string v2 = idx;
  v2[9] = 2;
  expect_error([&] { MegatronIndexedDataset(variant("version", v2, bin), 64); }, {"version.idx", "version 2"});
  expect_error([&] { MegatronIndexedDataset(variant("short", idx.substr(0, idx.size() - 3), bin), 64); },
               {"short.idx", "need"});
  expect_error([&] { MegatronIndexedDataset(variant("header", idx.substr(0, 20), bin), 64); },
               {"header.idx", "shorter than the 34-byte header"});
  expect_error([&] { MegatronIndexedDataset(variant("binsize", idx, bin.substr(0, 4)), 64); },
               {"binsize.bin", "4 bytes", "5 tokens"});
  expect_error([&] { MegatronIndexedDataset(dir.file("missing"), 64); }, {"missing.idx"});
  expect_error([&] { open_token_source(dir.file("nothing"), TokenFormat::kMegatron, 64); },
               {"Megatron dataset", "nothing.idx"});
}

TEST(MegatronIndexedDataset, PrepareRoundTripGivesTheSameTokensAndDocuments) {
  TempDir dir;
  std::string jsonl;
  for (int i = 0; i < 60; ++i) jsonl += fmt::format("{{\"text\": \"document {} says {}\"}}\n", i, std::string(i % 7, 'x'));
  test::write_file(dir.file("c.jsonl"), jsonl);
  PrepareOptions o;
  o.inputs = {dir.file("c.jsonl")};
  o.tokenizer = "bytes";
  o.valid_fraction = 0.2;
  o.output_dir = dir.file("moe4d");
  PrepareSummary a = prepare_corpus(o);
  o.output_dir = dir.file("megatron");
  o.output_format = "megatron";
  PrepareSummary b = prepare_corpus(o);
  EXPECT_TRUE(fs::exists(dir.file("megatron/train.idx")));
  EXPECT_FALSE(fs::exists(dir.file("megatron/train.json")));
  for (const char* split : {"train", "valid"}) {
    TokenDataset ours = TokenDataset::open(dir.file("moe4d/") + split);
    MegatronIndexedDataset theirs(dir.file("megatron/") + split, 257);
    EXPECT_EQ(theirs.num_documents(), ours.num_documents()) << split;
    EXPECT_EQ(all_tokens(theirs), all_tokens(TokenDatasetView(ours))) << split;
    // One sequence per document, each ending in the end-of-sequence id.
    int64_t end = 0;
    std::vector<int32_t> ids = all_tokens(theirs);
    for (int64_t s = 0; s < theirs.num_sequences(); ++s) {
      end += theirs.sequence_length(s);
      EXPECT_EQ(ids[size_t(end - 1)], 256) << split << " sequence " << s;
      EXPECT_EQ(theirs.document_index(s + 1), s + 1);
    }
  }
  EXPECT_EQ(a.train_documents + a.valid_documents, 60);
  EXPECT_EQ(b.train_tokens, a.train_tokens);
}

}  // namespace
}  // namespace moe4d
