// kernels/swiglu.h — the gated activation of the SwiGLU FFN: g = silu(a) * b, silu(a) = a * sigmoid(a).
// The FFN itself is (silu(x W1) * (x W3)) W2; the GEMMs are matmul_* calls (gemm.h).
#pragma once

#include <cstdint>

namespace moe4d {

// g, a, b: n elements. g overwritten.
void swiglu_forward(float* g, const float* a, const float* b, int64_t n);

// da = dg * b * silu'(a), db = dg * silu(a); both overwritten.
void swiglu_backward(float* da, float* db, const float* dg, const float* a, const float* b, int64_t n);

}  // namespace moe4d
