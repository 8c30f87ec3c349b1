// model/ffn_block.h — x + SwiGLU(RMSNorm(x)) = x + (silu(xn W1) * (xn W3)) W2, Megatron tensor parallel.
//
// W1, W3 [d, f] are column-parallel and W2 [f, d] row-parallel, so each TP rank computes a slice of
// the hidden activation and a partial output that is summed over the TP group.
#pragma once

#include "model/block_context.h"

namespace moe4d {

class FfnBlock {
 public:
  // Registers layers.<layer>.ffn_norm.weight and layers.<layer>.ffn.{w1,w3,w2}.weight.
  FfnBlock(int layer, const ModelConfig& model, const ParallelContext& pc, ParamStore& params);

  // Same contract as AttentionBlock::forward / backward.
  void* forward(const float* x_in, float* x_out, BlockContext& ctx) const;
  void backward(float* dx, const float* x_in, const void* saved, BlockContext& ctx) const;

 private:
  int norm_id_, w1_id_, w3_id_, w2_id_;
  int hidden_;
  int local_ffn_;
};

}  // namespace moe4d
