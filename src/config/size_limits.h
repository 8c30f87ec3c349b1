// config/size_limits.h — is every size a config implies representable by the runtime?
//
// The trainer indexes one tensor with 32-bit integers (row and column counts, BLAS dimensions,
// token and routed-row counts are `int`), so every tensor one rank holds — a weight shard, an
// activation of one micro-batch, the logits, the attention probabilities — must have at most
// 2^31 - 1 elements, and the rank count, the micro-batch size and the tokens of a micro-batch must
// fit an int. check_size_limits computes all of them in 64-bit (or wider) arithmetic from the
// config alone, before anything is allocated, and names the key to change.
//
// This is only representability; whether the layout fits the machine's memory is
// plan/memory_fit.h. Pure and thread-safe.
#pragma once

#include <cstdint>

#include "config/config.h"

namespace moe4d {

// The largest element count of one tensor on one rank, and of the int-typed counts.
inline constexpr int64_t kMaxTensorElements = 2147483647;  // 2^31 - 1

// Throws moe4d::Error with one line `<source>: <key>: ...` naming the tensor or count that would
// not be representable, its size and the limit.
void check_size_limits(const Config& config);

}  // namespace moe4d
