// train/nonfinite_diagnosis.h — which tensor went non-finite first, when a run must stop.
//
// Normal steps check nothing beyond the loss and the gradient norm they reduce anyway. When the
// NonfiniteGuard stops a run, the trainer re-runs the failing step (same data, same parameters:
// the bad steps before it were skipped) with a NonfiniteTracer installed as the blocks' tensor
// inspector, then asks all ranks for the earliest finding. "Earliest" is the step's causal order,
// which is comparable across ranks and pipeline stages:
//   0. the fp32 master weights (a non-finite weight poisons everything computed from it);
//   1. forward tensors, by layer from the embedding to the head;
//   2. backward tensors, by layer from the head back to the embedding;
//   3. the gradients after the data-parallel reduction (norms, embedding: not GEMM outputs);
// and within one layer the order in which this rank computed them; ties go to the lowest rank.
//
// The tracer is single-threaded like the blocks; agree_on_first_nonfinite is collective over the
// world (three small reductions/broadcasts, only on this failure path).
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include "comm/communicator.h"
#include "model/param_store.h"
#include "model/tensor_inspector.h"

namespace moe4d {

class Backend;

struct NonfiniteFinding {
  double order = std::numeric_limits<double>::infinity();  // causal position; infinity: nothing found
  std::string what;                                         // "layers.2 attention output (...)"
  bool found() const { return order != std::numeric_limits<double>::infinity(); }
};

class NonfiniteTracer : public TensorInspector {
 public:
  // upstream: an inspector that must still see every tensor first (the fault-injection hook of the
  // step being diagnosed), or null.
  // The checks run on `backend` (borrowed; null: this thread's CPU backend).
  NonfiniteTracer(const ParamStore& params, int num_layers, TensorInspector* upstream, Backend* backend = nullptr);

  void on_operand(const TensorSite& site, const float* data, int64_t n) override;
  void on_result(const TensorSite& site, float* data, int64_t n) override;

  // Stage 0: this rank's master weights. Stage 3: this rank's gradients (after the reduction).
  void check_values();
  void check_gradients();

  const NonfiniteFinding& first() const { return first_; }

 private:
  void check(const TensorSite& site, const float* data, int64_t n);
  double order(int stage, int layer, int64_t within) const;

  const ParamStore& params_;
  Backend& backend_;
  int num_layers_;
  TensorInspector* upstream_;
  int64_t sequence_ = 0;  // tensors seen so far, the order within a layer
  NonfiniteFinding first_;
};

struct NonfiniteDiagnosis {
  bool found = false;
  int rank = -1;     // world rank that saw it first
  std::string what;  // its description
};

// Collective over `world`: the earliest of every rank's finding.
NonfiniteDiagnosis agree_on_first_nonfinite(const NonfiniteFinding& mine, Communicator& world);

}  // namespace moe4d
