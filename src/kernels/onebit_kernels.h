// kernels/onebit_kernels.h — the element-wise kernels of 1-bit Adam (train/onebit_adam.h): the
// sign compression of the error-compensated all-reduce, and the frozen-variance update.
#pragma once

#include <cstddef>
#include <cstdint>

namespace moe4d {

// Bytes of one compressed block of `chunk` elements (chunk a multiple of 8): [fp32 scale][chunk/8 sign bits].
inline size_t onebit_block_bytes(size_t chunk) { return sizeof(float) + chunk / 8; }

// Compresses x[n] (n <= chunk) into block = [fp32 scale][chunk / 8 bytes of sign bits] and leaves
// x - decompressed in error[n]. scale = |x|_2 / sqrt(n), bit set = non-negative.
void onebit_compress(const float* x, size_t n, size_t chunk, float* error, uint8_t* block);

// out[i] = (or +=, if accumulate) weight x decompressed block element i, for i < n.
void onebit_decompress(const uint8_t* block, size_t n, float weight, float* out, bool accumulate);

// m[i] = beta1 * m[i] + coef * grad[i], for i < n (the momentum of the compressed stage).
void momentum_update(float* m, const float* grad, float beta1, float coef, size_t n);

// The frozen-variance step of 1-bit Adam:
//   p[i] = p[i] - lr * (m[i] * inv_bc1) / (sqrt(v[i] * inv_bc2) + eps) - decay * p[i].
void onebit_adam_update(float* param, const float* m, const float* v, size_t n, float lr, float inv_bc1, float inv_bc2,
                        float eps, float decay);

}  // namespace moe4d
