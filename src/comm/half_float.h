// comm/half_float.h — the 16-bit float wire formats of reductions (bf16, fp16) and their scalar
// conversions to and from fp32.
//
// A backend reduces 16-bit buffers pairwise in fp32 and rounds each result back (round-to-nearest-
// even), as NCCL does for bf16; gradient compression (train/grad_sync.cc) packs and unpacks its
// buffers with the same conversions, so both sides of the wire round alike. bf16 keeps NaNs quiet;
// fp16 uses the compiler's _Float16 conversions (IEEE binary16, overflow to infinity).
#pragma once

#include <cstdint>

namespace moe4d {

float bf16_to_float(uint16_t bits);
uint16_t float_to_bf16(float value);
float f16_to_float(uint16_t bits);
uint16_t float_to_f16(float value);

}  // namespace moe4d
