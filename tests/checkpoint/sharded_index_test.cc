// Tests of checkpoint/sharded_index.h without MPI: a tensor stored as pieces of several blocks, each
// cut into flat ranges (as TP/EP blocks cut into ZeRO slices are), reads back exactly through any
// block and flat range; a full-tensor checkpoint reads the same; the index is validated (pieces that
// leave a hole, a block outside the tensor) and `verify` names a piece its file lacks.
#include "checkpoint/sharded_index.h"

#include <gtest/gtest.h>

#include <random>

#include "../common/temp_dir.h"
#include "checkpoint/checkpoint_inspect.h"
#include "core/error.h"

namespace moe4d {
namespace {

constexpr int64_t kRows = 6, kCols = 5;

float value_at(int64_t r, int64_t c) { return float(r * 100 + c); }

// The tensor [6, 5] as two row blocks (rows 0-2 and 3-5), the first cut into flat ranges [0, 4),
// [4, 11), [11, 15), the second whole; pieces spread over two "rank" files.
std::string write_sharded(const std::string& root, bool leave_hole = false, bool wrong_key = false) {
  struct Cut {
    int64_t row0, rows, begin, end;
    int file;
  };
  const std::vector<Cut> cuts = {{0, 3, 0, 4, 0}, {0, 3, 4, 11, 1}, {0, 3, 11, 15, 0}, {3, 3, 0, 15, 1}};
  std::vector<std::vector<float>> data;
  NamedTensors files[2];
  ShardedIndex index;
  index["w"].shape = {kRows, kCols};
  for (const Cut& cut : cuts) {
    if (leave_hole && cut.begin == 4) continue;
    std::vector<float> piece;
    for (int64_t i = cut.begin; i < cut.end; ++i) piece.push_back(value_at(cut.row0 + i / kCols, i % kCols));
    data.push_back(std::move(piece));
    const std::string key = fmt::format("w@{}-{}", cut.row0, cut.begin);
    files[cut.file].emplace_back(key, Tensor::f32(data.back().data(), Shape{cut.end - cut.begin}));
    index["w"].pieces.push_back(ShardedPiece{fmt::format("rank_{:05d}.safetensors", cut.file),
                                             wrong_key && cut.begin == 4 ? key + "x" : key, {cut.row0, 0},
                                             {cut.rows, kCols}, cut.begin, cut.end});
  }
  CheckpointWriter writer(root, 3);
  for (int f = 0; f < 2; ++f) writer.add_safetensors(fmt::format("rank_{:05d}.safetensors", f), files[f]);
  writer.add_json(kShardedIndexFile, sharded_index_to_json(index));
  return writer.commit(5);
}

TEST(ShardedIndex, AnyBlockAndFlatRangeReadsBackExactly) {
  test::TempDir dir("moe4d-sharded-index");
  const Checkpoint checkpoint = Checkpoint::open(write_sharded(dir.file("ckpt")));
  const CheckpointTensors tensors(checkpoint);
  ASSERT_TRUE(tensors.sharded());
  EXPECT_EQ(tensors.shape("w"), (std::vector<int64_t>{kRows, kCols}));
  EXPECT_EQ(tensors.pieces("w"), 4u);
  std::mt19937 gen(3);
  for (int trial = 0; trial < 300; ++trial) {
    std::uniform_int_distribution<int64_t> row(0, kRows - 1), col(0, kCols - 1);
    const int64_t r0 = row(gen), c0 = col(gen);
    const int64_t rows = std::uniform_int_distribution<int64_t>(1, kRows - r0)(gen);
    const int64_t cols = std::uniform_int_distribution<int64_t>(1, kCols - c0)(gen);
    const int64_t n = rows * cols;
    const int64_t begin = std::uniform_int_distribution<int64_t>(0, n - 1)(gen);
    const int64_t end = std::uniform_int_distribution<int64_t>(begin + 1, n)(gen);
    std::vector<float> got(size_t(end - begin), -1.0f);
    tensors.read("w", BlockRange{{r0, c0}, {rows, cols}, begin, end}, got.data());
    for (int64_t i = begin; i < end; ++i)
      ASSERT_EQ(got[size_t(i - begin)], value_at(r0 + i / cols, c0 + i % cols))
          << "block [" << r0 << "," << c0 << "] + [" << rows << "," << cols << "] element " << i;
  }
  EXPECT_THROW(tensors.read("w", whole_block({4, 0}, {3, kCols}), std::vector<float>(15).data()), Error);
  EXPECT_THROW(tensors.shape("missing"), Error);
}

TEST(ShardedIndex, FullTensorCheckpointReadsThroughTheSamePath) {
  test::TempDir dir("moe4d-sharded-index");
  std::vector<float> w;
  for (int64_t i = 0; i < kRows * kCols; ++i) w.push_back(value_at(i / kCols, i % kCols));
  CheckpointWriter writer(dir.file("full"), 1);
  writer.add_safetensors("model.safetensors", {{"w", Tensor::f32(w.data(), Shape{kRows, kCols})}});
  const Checkpoint checkpoint = Checkpoint::open(writer.commit(1));
  const CheckpointTensors tensors(checkpoint);
  EXPECT_FALSE(tensors.sharded());
  std::vector<float> got(4);
  tensors.read("w", BlockRange{{2, 1}, {2, 3}, 1, 5}, got.data());
  EXPECT_EQ(got, (std::vector<float>{value_at(2, 2), value_at(2, 3), value_at(3, 1), value_at(3, 2)}));
}

TEST(ShardedIndex, IndexIsValidatedAndVerifyChecksThePieces) {
  test::TempDir dir("moe4d-sharded-index");
  std::string error;
  try {
    const Checkpoint checkpoint = Checkpoint::open(write_sharded(dir.file("hole"), /*leave_hole=*/true));
    CheckpointTensors tensors(checkpoint);
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("tensor 'w': the pieces hold 23 elements, the tensor has 30"), std::string::npos) << error;

  nlohmann::json outside = {{"format", "moe4d-sharded"}, {"version", 1},
                            {"tensors", {{"w", {{"dtype", "F32"}, {"shape", {2, 2}},
                                                {"pieces", {{{"file", "f"}, {"key", "k"}, {"start", {1, 0}},
                                                             {"shape", {2, 2}}, {"begin", 0}, {"end", 4}}}}}}}}};
  EXPECT_THROW(sharded_index_from_json(outside, "index.json"), Error);

  // A piece named by the index but absent from its file: verify says which.
  const std::string good = write_sharded(dir.file("ok"));
  EXPECT_EQ(sharded_index_problem(good), "");
  EXPECT_TRUE(verify_checkpoint(good).ok());
  const CheckpointCheck check = verify_checkpoint(write_sharded(dir.file("bad-key"), false, /*wrong_key=*/true));
  EXPECT_NE(check.problem.find("rank_00001.safetensors has no piece 'w@0-4x' of tensor 'w'"), std::string::npos)
      << check.problem;
}

}  // namespace
}  // namespace moe4d
