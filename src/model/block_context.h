// model/block_context.h — what a transformer block needs to run one micro-batch.
//
// Blocks (attention, dense FFN, MoE) are residual sub-layers: out = in + f(RMSNorm(in)). Their
// forward saves what backward needs in `saved` (the micro-batch's arena, alive until its backward);
// temporaries go to `scratch`, which the caller resets after each block call. Gradients of the
// block's parameters are accumulated into the ParamStore (they sum over micro-batches).
//
// Kernels: every kernel of a block runs on the Backend of `numerics` (backend/backend.h), never a
// free function of src/kernels; the Trainer owns that backend and the step executor hands it down.
//
// Precision: the blocks' weight GEMMs run in the precision `numerics` says (model/block_matmul.h,
// docs/precision.md); norms, softmax, router, loss and the residual stream are always fp32.
#pragma once

#include <vector>

#include "config/config.h"
#include "core/arena.h"
#include "model/layer_hooks.h"
#include "parallel/parallel_context.h"

namespace moe4d {

class Backend;
class ParamStore;
class TensorInspector;
struct RopeTable;

// Where and how the blocks compute. The default is this thread's CPU backend, fp32, nothing watching.
struct BlockNumerics {
  Backend* backend = nullptr;            // borrowed; null: this thread's CPU backend (thread_cpu_backend())
  DType compute = DType::kF32;           // weight GEMMs: kF32, or kBF16 / kF16 (16-bit operands, fp32 sums)
  TensorInspector* inspector = nullptr;  // null: none; else sees every block GEMM tensor (borrowed)
};

// Per-MoE-layer routing statistics of one micro-batch, summed over micro-batches of a step.
struct MoeLayerStats {
  int layer = -1;
  std::vector<double> tokens_per_expert;  // routed slots per (global) expert, before capacity
  double dropped_slots = 0;               // slots dropped by the capacity limit
  double routed_slots = 0;
  double aux_loss = 0;                    // sum over micro-batches of the unscaled aux loss
  double z_loss = 0;
  int micro_batches = 0;
  // With moe.redundant_experts > 0 (recorded by EP rank 0 of each EP group): rows each EP rank
  // processed, with the replica placement and as they would have been without it; replica bytes
  // moved (weight fetch + gradient return) by all EP ranks.
  std::vector<double> rank_rows, rank_rows_without;
  double replica_bytes = 0;  // filled in by the trainer after the backward
  // Rows the dispatch sent to an EP rank on another node, and what it would send without replicas.
  double cross_node_rows = 0, cross_node_rows_without = 0;

  // Zeroes every count and sum of the step, keeping the layer and the lengths (host statistics).
  void reset() {
    tokens_per_expert.assign(tokens_per_expert.size(), 0.0);
    dropped_slots = routed_slots = aux_loss = z_loss = 0;
    micro_batches = 0;
    rank_rows.assign(rank_rows.size(), 0.0);
    rank_rows_without.assign(rank_rows_without.size(), 0.0);
    replica_bytes = cross_node_rows = cross_node_rows_without = 0;
  }
};

struct BlockContext {
  ParallelContext& pc;
  ParamStore& params;
  const ModelConfig& model;
  const RopeTable& rope;
  Arena& saved;    // activations kept for backward
  Arena& scratch;  // temporaries, reset by the caller between blocks
  int batch = 0;   // sequences in this micro-batch (on this data replica)
  int seq = 0;
  // Weight of this micro-batch's loss in the step objective: the objective is the mean over all
  // micro-batches of all data replicas, so grad_scale = 1 / (data_replicas * micro_batch_num),
  // times the loss scale under fp16 dynamic loss scaling (train/loss_scaler.h).
  float grad_scale = 1.0f;
  RecomputeGranularity recompute = RecomputeGranularity::kNone;
  std::vector<MoeLayerStats>* moe_stats = nullptr;  // null: don't record (evaluation)
  BlockNumerics numerics;  // set by the step executor from the training precision
  // Sequence parallelism (model/sequence_shard.h): the residual stream, the norms and the blocks'
  // inputs and outputs hold only this TP rank's slice of every sequence, shard_tokens() rows.
  bool sequence_parallel = false;
  // Told which gradient elements are final during backward (model/layer_hooks.h); set by the
  // Transformer's backward to its layer hooks, null: nobody listens.
  LayerHooks* grad_hooks = nullptr;
  // Told which parameter values a block is about to read and when it is done (model/layer_hooks.h);
  // set by the Transformer's passes to its layer hooks, null: values are always resident.
  LayerHooks* value_hooks = nullptr;
  // Backward: the parameters' gradients are read (reduced) after this backward — the last one of the
  // step under ZeRO 0/1, every one under ZeRO-2/3. Until then a block may hold gradient
  // contributions it computed elsewhere (expert replicas: model/expert_replicas.h) and send them
  // to their parameter's owner once.
  bool grads_final = true;

  // The backend every kernel of the blocks runs on (numerics.backend, or this thread's CPU backend).
  Backend& backend() const;
  int tokens() const { return batch * seq; }
  // Context parallelism (model/context_parallel.h): seq is this rank's share of each sequence of
  // full_seq() positions.
  bool context_parallel() const { return pc.cp_size() > 1; }
  int full_seq() const { return seq * pc.cp_size(); }
  bool sequence_sharded() const { return sequence_parallel && pc.tp_size() > 1; }
  int shard_tokens() const { return sequence_sharded() ? tokens() / pc.tp_size() : tokens(); }
};

}  // namespace moe4d
