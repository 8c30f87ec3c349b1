// model/block_matmul.h — the GEMMs of the transformer blocks, in the compute precision of the step.
//
// Every weight GEMM of the attention, FFN, MoE and head blocks goes through this pair, which reads
// BlockContext::numerics:
//   gemm == null  — fp32 through moe4d::gemm, exactly the calls of kernels/gemm.h's matmul pair
//                   (the reference path; bit-identical to the code before mixed precision);
//   gemm != null  — its type's 16-bit GEMM (kernels/precision_gemm.h): operands rounded to 16 bit,
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
  // the ParamStore; weight_id still names the parameter it copies.
  const float* weight = nullptr;
  float* weight_grad = nullptr;
};

// out[n, out_dim] = in[n, in_dim] @ W (overwritten). round_output: a 16-bit path stores it in 16 bits.
void block_matmul_forward(BlockContext& ctx, const BlockGemm& g, float* out, const float* in, int n, int in_dim,
                          int out_dim, bool round_output = true);

// din[n, in_dim] = dout @ W^T (added to din if accumulate_din; skipped if din is null) and
// dW += in^T @ dout into the parameter's gradient (skipped if in is null).
void block_matmul_backward(BlockContext& ctx, const BlockGemm& g, float* din, const float* dout, const float* in,
                           int n, int in_dim, int out_dim, bool accumulate_din);

}  // namespace moe4d
