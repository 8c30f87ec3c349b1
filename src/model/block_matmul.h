// model/block_matmul.h — the GEMMs of the transformer blocks, in the compute precision of the step.
//
// Every weight GEMM of the attention, FFN, MoE and head blocks goes through this pair, which runs
// Backend::gemm on ctx.backend() in the compute type of BlockContext::numerics:
//   kF32          — fp32 (on the CPU backend OpenBLAS sgemm, exactly the calls of kernels/gemm.h's
//                   matmul pair: the reference path, bit-identical to the code before mixed precision);
//   kBF16 / kF16  — that type's 16-bit GEMM (kernels/precision_gemm.h): operands rounded to 16 bit,
//                   fp32 accumulation. Forward outputs are rounded to 16 bit when they are stored
//                   activations (round_output), input gradients always (they are 16-bit
//                   activation gradients in a real mixed-precision backward), weight gradients
//                   never (they accumulate into the fp32 gradient buffer of the fp32 master weights).
//   keep_fp32     — this GEMM stays fp32 whatever the precision (the router, docs/model.md §1).
// With an inspector installed, every operand and result is shown to it (model/tensor_inspector.h).
//
// Shapes: W is the parameter's value (or one expert's [in_dim, out_dim] slice of it), stored
// [in_dim, out_dim], or [out_dim, in_dim] when weight_transposed (the tied embedding used as head).
#pragma once

#include "model/block_context.h"
#include "model/tensor_inspector.h"

namespace moe4d {

struct BlockGemm {
  GemmLabels labels;
  int weight_id = -1;
  int local_expert = -1;      // expert slice of an [experts, in, out] weight held here; -1: whole weight
  int global_expert = -1;     // its index in the model, for names
  bool weight_transposed = false;
  bool keep_fp32 = false;
  // Set for an expert replica slot (model/expert_replicas.h): its weight and gradient live outside
  // the ParamStore; weight_id still names the parameter it copies. weight_grad alone: a buffer the
  // caller reduces and reports itself (the sequence-parallel router, model/moe_block.cc).
  const float* weight = nullptr;
  float* weight_grad = nullptr;
};

// out[n, out_dim] = in[n, in_dim] @ W (overwritten). round_output: a 16-bit path stores it in 16 bits.
void block_matmul_forward(BlockContext& ctx, const BlockGemm& g, float* out, const float* in, int n, int in_dim,
                          int out_dim, bool round_output = true);

// din[n, in_dim] = dout @ W^T (added to din if accumulate_din; skipped if din is null) and
// dW += in^T @ dout into the parameter's gradient (skipped if in is null: block_matmul_weight_grad).
void block_matmul_backward(BlockContext& ctx, const BlockGemm& g, float* din, const float* dout, const float* in,
                           int n, int in_dim, int out_dim, bool accumulate_din);

// dW += in^T @ dout alone. With grad hooks (ctx.grad_hooks) the rows of dW are written from the last
// one down, in blocks that end at the hooks' cut points (a ZeRO bucket's start, rounded down to a
// row), and each block is reported ready as soon as it is written, so a bucket inside a large weight
// is reduced before the rest of the weight exists. The blocks only split the GEMM's M dimension.
// With an inspector installed the gradient is written at once, shown to it, then reported. n may be
// 0 (an expert without rows): nothing is computed, but the same blocks are reported, so that every
// rank of a data-parallel group reports — and ZeRO launches its buckets — in the same order.
void block_matmul_weight_grad(BlockContext& ctx, const BlockGemm& g, const float* dout, const float* in, int n,
                              int in_dim, int out_dim);

// Tells the grad hooks that elements [begin, end) of parameter `id`'s gradient are written for this
// micro-batch (no-op without hooks); the second form reports the whole parameter.
void grad_ready(BlockContext& ctx, int id, size_t begin, size_t end);
void grad_ready(BlockContext& ctx, int id);

// One read of elements [begin, end) of parameter `id`'s value (the whole parameter by default),
// announced to the value hooks for as long as this object lives (model/layer_hooks.h): under ZeRO-3
// the values are gathered when it is built and may be released once it is gone. Scope it to the
// kernel that reads the values.
class ValueUse {
 public:
  ValueUse(BlockContext& ctx, int id);
  ValueUse(BlockContext& ctx, int id, size_t begin, size_t end);
  ~ValueUse();
  ValueUse(const ValueUse&) = delete;
  ValueUse& operator=(const ValueUse&) = delete;
  // The parameter's values from `begin` on.
  const float* data() const { return data_; }

 private:
  LayerHooks* hooks_;
  int id_;
  size_t begin_, end_;
  const float* data_;
};

// The value reads block_matmul_forward / block_matmul_backward (with din) would make for `g`, without
// reading: an expert that got no rows in a slice still takes part in the gathers (the other ranks of
// its data-parallel group may have rows for it, and the gathers are collective).
void block_matmul_values_touch(BlockContext& ctx, const BlockGemm& g, int in_dim, int out_dim);

// Row blocks start at multiples of this many rows. BLAS kernels compute a GEMM in tiles of a few rows
// of C (OpenBLAS sgemm: 4 on Haswell/Zen, 16 on Skylake-X), each element with the same K order
// whichever tile it is in, so blocks that start on a tile boundary give every element the same bits
// as one GEMM over all rows (tests/model/grad_blocks_test.cc); a block starting mid-tile would not.
// Not every BLAS keeps to that: OpenBLAS on an AVX2 EPYC takes other kernels for small GEMMs, and
// there the blocks agree with one GEMM to float rounding (3e-8 of 0.2) instead of bit for bit.
// The price: up to kGradRowAlign rows below a bucket's start are written with the bucket above it.
constexpr size_t kGradRowAlign = 16;

// Visits the rows [0, rows) of a [rows, row_len] gradient that starts at element `offset` of
// parameter `id`, from the last row down, in blocks that end at the grad hooks' cut points rounded
// down to kGradRowAlign rows (one block without hooks or when `split` is false): fn(row_begin,
// row_end) writes a block, which is then reported.
template <typename Fn>
void for_each_grad_block(BlockContext& ctx, int id, size_t offset, size_t rows, size_t row_len, bool split, Fn&& fn) {
  LayerHooks* hooks = ctx.grad_hooks;
  size_t hi = rows;
  while (hi > 0) {
    size_t lo = 0;
    if (hooks && split) {
      // The cut lies below the block's end, so its row rounded down does too: lo < hi.
      const size_t cut = hooks->grad_cut_below(id, offset + hi * row_len);
      if (cut > offset) lo = (cut - offset) / row_len / kGradRowAlign * kGradRowAlign;
    }
    fn(lo, hi);
    grad_ready(ctx, id, offset + lo * row_len, offset + hi * row_len);
    hi = lo;
  }
}

}  // namespace moe4d
