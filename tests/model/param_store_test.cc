// Parameter shards: a sharded parameter is initialised to exactly the slice of the unsharded one.
#include <gtest/gtest.h>

#include "model/param_store.h"

namespace moe4d {
namespace {

TEST(ParamStore, ShardInitEqualsSliceOfFullInit) {
  ParamStore full, shard;
  const Shape shape{4, 6, 10};
  full.add({.name = "layers.0.moe.experts.w1", .global_shape = shape});
  // EP 2 (rank 1) on the expert dim and TP 2 (rank 0) on the last dim.
  const int id = shard.add({.name = "layers.0.moe.experts.w1", .global_shape = shape,
                            .shards = {{0, 2, 1}, {2, 2, 0}}});
  full.finalize();
  shard.finalize();
  full.init_values(42);
  shard.init_values(42);
  EXPECT_EQ(shard.info(id).local_shape, (Shape{2, 6, 5}));
  const float* f = full.value(0);
  const float* s = shard.value(id);
  for (int e = 0; e < 2; ++e)
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j < 5; ++j) EXPECT_EQ(s[(e * 6 + i) * 5 + j], f[((e + 2) * 6 + i) * 10 + j]);
}

TEST(ParamStore, DifferentNamesAndSeedsGiveDifferentValues) {
  ParamStore a, b;
  a.add({.name = "x", .global_shape = {64}});
  a.add({.name = "y", .global_shape = {64}});
  b.add({.name = "x", .global_shape = {64}});
  a.finalize();
  b.finalize();
  a.init_values(1);
  b.init_values(2);
  EXPECT_NE(a.value(0)[0], a.value(1)[0]);
  EXPECT_NE(a.value(0)[0], b.value(0)[0]);
  double sum = 0, sq = 0;
  for (int i = 0; i < 64; ++i) {
    sum += a.value(0)[i];
    sq += a.value(0)[i] * a.value(0)[i];
  }
  EXPECT_NEAR(std::sqrt(sq / 64), 0.02, 0.008);  // std 0.02
}

}  // namespace
}  // namespace moe4d
