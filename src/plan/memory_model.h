// plan/memory_model.h — bytes per device of a layout: state, activations, buffers, reserve.
//
// What is counted (the runtime's layout, docs/planner.md §Memory; T = micro_batch_size * seq tokens,
// t = TP, a = activation bytes: 2 for bf16/fp16, 4 for fp32):
//  * weights: fp32 master parameters (ZeRO-3: / data-parallel group), plus a 16-bit compute copy
//    under bf16/fp16 (ZeRO-3: sharded too); gradients fp32 (ZeRO >= 2: sharded); AdamW m and v fp32
//    (ZeRO >= 1: sharded). The data-parallel group is dp * ep for dense parameters, dp for experts.
//  * ZeRO-3 gather buffers (compute precision): the buckets of the largest single weight read (as
//    many whole buckets as a range of its length can touch) plus zero3_prefetch_buckets per group
//    gathered ahead.
//  * ZeRO-2/3 gradient buckets: the fp32 gradients of the largest unit (a layer, or the embedding
//    table / head) plus two partly complete buckets, not yet reduce-scattered, and two staged
//    buckets in flight (wire precision). Buckets: TrainingSetup::bucket_elements.
//  * activations saved for backward, per layer and micro-batch (no recompute): layer input [T,d],
//    norm rstd [T] (fp32) + normed [T,d], qkv [T,3d/t], softmax probs [b,h/t,S,S], attention output
//    [T,d/t], residual [T,d], second rstd + normed [T,d]; dense FFN W1, W3 outputs and the gated
//    product [T,f/t] each; MoE router logits and probs [T,E] (fp32), top-k indices and weights
//    [T,k] (4 bytes), permuted tokens [R,d], W1/W3/gated [R,f/t], expert outputs [R,d], where R =
//    T k rows arrive per device under balanced routing (fewer when the capacity drops slots).
//    Selective recompute drops probs and gated products; full recompute keeps only the layer input.
//    Head (last stage): final norm input and output [T,d], logits [T,V/t] in fp32.
//    Times the micro-batches in flight of the schedule (plan/schedule_model.h). On moe4d's own
//    runtime, plus each in-flight chunk's output and the residual gradient (runtime_stage_bytes).
//    Sequence parallelism (Korthikanti et al. 2022) divides the tensors outside the TP regions by t:
//    the layer input, both norms' rstd and outputs, the residual, the final norm's input and
//    output, the full-recompute checkpoint and the PP messages, and the MoE router's logits and
//    probs (each TP rank routes its shard, model/moe_block.h), which adds the shard's [T/t, k] top-k
//    copy to the gathered [T, k] decisions. Per dense layer
//    with a-byte activations, SwiGLU width f, MHA, no dropout, this is, in the paper's terms,
//      without SP:  sbh (4 + 4/t + 3f/(ht)) a + a b n s^2 / t + 8 sb
//      with SP:     sbh/t (8 + 3f/h) a      + a b n s^2 / t + 8 sb / t
//    (n heads, qkv 3h wide). For bf16 and f = 8h/3 the SP form is sbh/t (32 + 2 n s / h) + 8 sb/t: the
//    paper's sbh/t (34 + 5 n s / h) without dropout (its 5 counts the softmax output, the dropout mask
//    and the dropout output; its 34 a GeLU input and two dropout masks, here SwiGLU's two inputs).
//  * workspace: the backward of one layer materialises gradients as large as that layer's full
//    activations; full recompute adds the rematerialised layer, selective its probs and gated.
//  * communication buffers: PP send + receive [T,d]; EP dispatch/combine staging 2 [R,d]; ZeRO 0/1
//    with compressed gradients two 16-bit staging buckets.
//  The sum is the peak of a step (what the fit decision compares with the device), not the state
//  held between steps.
//  * checkpoint staging (checkpoint.async): the fp32 values and both AdamW moments of the slices the
//    device writes (its ZeRO slice of its block, in every ZeRO stage: train/checkpoint_shards.h),
//    12 bytes per element, held from one save to its commit (plan/checkpoint_model.h).
//  * reserve: ClusterSpec::memory_reserve_fraction of the device.
// Pure functions; a layout's peak is the maximum over its pipeline stages (LayoutEvaluator::memory).
#pragma once

#include "config/config.h"
#include "plan/cluster_spec.h"
#include "plan/layout.h"
#include "plan/param_count.h"
#include "plan/training_setup.h"

namespace moe4d {

struct MemoryBreakdown {
  double weights = 0;       // fp32 master parameters
  double weights16 = 0;     // 16-bit compute copy
  double gradients = 0;
  double optimizer = 0;     // AdamW m, v
  double zero3_gather = 0;  // ZeRO-3: the running layer's buckets + the prefetched ones
  double grad_buckets = 0;  // ZeRO-2/3: full gradients not yet reduce-scattered + staged buckets
  double activations = 0;   // saved for backward, all micro-batches in flight
  double workspace = 0;
  double comm_buffers = 0;
  double checkpoint_staging = 0;  // checkpoint.async: a copy of the values and moments this device saves
  double reserve = 0;
  int stage = 0;            // pipeline stage these numbers are for

  double state() const { return weights + weights16 + gradients + optimizer; }
  double total() const {
    return weights + weights16 + gradients + optimizer + zero3_gather + grad_buckets + activations + workspace +
           comm_buffers + checkpoint_staging + reserve;
  }
};

// Rows of [*, d] that one device's experts process per micro-batch of `tokens` tokens: T * k under
// balanced dropless routing; with capacity_factor cf at most E * ceil(T k cf / E).
double routed_rows(const ModelConfig& model, double tokens);
// The busiest device's rows: routed_rows times setup.expert_imbalance when experts are spread over
// EP > 1 devices (with EP = 1 every device holds every expert and sees all T k rows).
double device_routed_rows(const ModelConfig& model, const TrainingSetup& setup, const Layout& layout, double tokens);

struct LayerActivations {
  double saved = 0;  // bytes kept for backward under the layout's recompute setting
  double full = 0;   // bytes kept without recompute
  double probs = 0;  // attention probabilities (part of full)
  double gated = 0;  // gated products (part of full)
};

// One layer, one micro-batch, one device.
// fused_attention: ClusterSpec's DeviceSpec::fused_attention (flash attention: the softmax statistics
// [b, h/t, S] in fp32 instead of the [b, h/t, S, S] probabilities).
LayerActivations layer_activations(const ModelConfig& model, const TrainingSetup& setup, const Layout& layout,
                                   bool moe_layer, bool fused_attention = false);

// Head activations of one micro-batch on the last stage.
double head_activation_bytes(const ModelConfig& model, const TrainingSetup& setup, const Layout& layout);

// Whether the device runs moe4d's own runtime rather than a Megatron-LM / MindFormers stack: neither
// fused nor square attention (DeviceSpec; the GPU/NPU presets and the published runs set one of them).
bool own_runtime(const DeviceSpec& device);

// What moe4d's runtime keeps in a micro-batch's saved-activation arena beyond the layers' and the
// head's activations, in every recompute mode (train/step_executor.cc, model/transformer.cc): each
// chunk's output [T, d] until that chunk's backward, for every chunk in flight (in_flight: the
// stage's micro-batches in flight, plan/schedule_model.h) but the head's, whose input it is; and the
// residual-stream gradient [T, d] of the micro-batch in backward. Megatron-LM frees a sent output's
// storage (deallocate_pipeline_outputs) and its running gradient is workspace, so the stacks' devices
// are not charged with these (own_runtime).
double runtime_stage_bytes(const ModelConfig& model, const TrainingSetup& setup, const Layout& layout,
                           double in_flight, double head_in_flight);

// Memory of one device of `stage`; `params` = stage_params(model, layout, stage).
MemoryBreakdown stage_memory(const ModelConfig& model, const TrainingSetup& setup, const Layout& layout,
                             const ClusterSpec& cluster, int stage, const StageParams& params);

// Usable memory for the layout's parts: the device memory (the reserve is one of the parts).
inline double memory_limit(const ClusterSpec& cluster) { return cluster.device.memory_bytes; }

}  // namespace moe4d
