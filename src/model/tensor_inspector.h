// model/tensor_inspector.h — a window on the tensors the blocks' GEMMs read and write, for the
// non-finite diagnosis (train/nonfinite_guard.h) and for fault-injection tests.
//
// Installed through BlockContext::numerics.inspector (null in normal training: nothing is checked
// and nothing is paid). While installed, the block GEMM helpers (model/block_matmul.h) report every
// activation operand, result and weight gradient of every block GEMM, in execution order, on the
// thread that runs the blocks. A site names a tensor by the GEMM's weight and what the tensor is,
// so that a diagnosis can say "layers.2 attention output" or "layers.3.moe.experts.w2[5] gradient".
#pragma once

#include <cstdint>
#include <string>

namespace moe4d {

class ParamStore;

enum class TensorRole {
  kForwardInput,    // the activation a forward GEMM reads
  kForwardOutput,   // the activation it writes
  kOutputGradient,  // the gradient of that output, which the backward GEMMs read
  kInputGradient,   // the gradient the backward passes on to the GEMM's input
  kWeightGradient,  // the weight gradient, after this micro-batch's contribution was accumulated
};

// What a GEMM's input and output are within their layer, e.g. {"attention core output",
// "attention output"}. Static strings.
struct GemmLabels {
  const char* input = "";
  const char* output = "";
};

struct TensorSite {
  int param_id = -1;  // the GEMM's weight in the ParamStore
  int expert = -1;    // global expert index for expert GEMMs, else -1
  TensorRole role = TensorRole::kForwardOutput;
  GemmLabels labels;

  // True for the forward pass roles (kForwardInput, kForwardOutput).
  bool forward() const { return role == TensorRole::kForwardInput || role == TensorRole::kForwardOutput; }
};

// Human-readable name: "layers.2 attention output (forward output of layers.2.attn.out.weight)",
// "gradient of layers.1 expert 3 output (backward input of layers.1.moe.experts.w2[3])",
// "layers.3.moe.experts.w2[5] gradient".
std::string describe_tensor_site(const TensorSite& site, const ParamStore& params);

class TensorInspector {
 public:
  virtual ~TensorInspector() = default;
  // A tensor a GEMM reads (kForwardInput, kOutputGradient): n contiguous floats.
  virtual void on_operand(const TensorSite& site, const float* data, int64_t n) = 0;
  // A tensor a GEMM wrote (kForwardOutput, kInputGradient, kWeightGradient), before anything reads
  // it: n contiguous floats, which the inspector may change (fault injection).
  virtual void on_result(const TensorSite& site, float* data, int64_t n) = 0;
};

}  // namespace moe4d
