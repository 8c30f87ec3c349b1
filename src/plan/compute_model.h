// plan/compute_model.h — compute time of one micro-batch on one device.
//
// Every matrix product of the reference model is listed with its per-device shape (after TP/EP
// sharding) and timed as 2 M N K / (peak(precision) * efficiency(cbrt(M N K))), the efficiency
// curve coming from the cluster (measured by `moe4d bench` or the preset's), and never faster than
// the roofline (M K + K N + M N) elements / memory bandwidth. Causal attention is
// timed as the runtime computes it (kernels/attention.cc, like flash-attention kernels): per
// sequence and head, query rows in blocks of kCausalBlock, block [r0, r1) multiplying only keys
// [0, r1) — the masked upper triangle is skipped, not computed and zeroed. Element-wise work
// (norms, RoPE, softmax, SiLU, residual adds) is memory-bound: it reads and writes about twice the
// layer's activations, at the device's memory bandwidth. Backward costs twice the forward (one
// GEMM for the input gradient, one for the weight gradient). Without fused attention on a stack
// that computes the square (DeviceSpec::square_attention, Megatron-LM before flash attention) QK^T
// and PV run over all S x S and the softmax (and dropout, TrainingSetup::dropout) are passes over the
// stored [b, h/t, S, S] probabilities. Every kernel of a layer also costs DeviceSpec::kernel_overhead.
// Pure functions.
#pragma once

#include "config/config.h"
#include "plan/cluster_spec.h"
#include "plan/layout.h"
#include "plan/training_setup.h"

namespace moe4d {

// Query rows per block of the causal attention GEMMs (kernels/attention.cc kBlock).
inline constexpr double kCausalBlock = 64;

// Output tile of a large GEMM kernel on a GPU (cuBLAS / CUTLASS 256 x 128 thread-block tiles, NVIDIA's
// "Matrix Multiplication Background User's Guide"): the tiles spread over the SMs in waves.
inline constexpr double kTileRows = 256;
inline constexpr double kTileCols = 128;

// Share of the SM-time that `count` GEMMs with [m, n] outputs keep busy: T tiles run in ceil(T / units)
// waves, the last one partly idle (wave quantisation), the better of the two tile orientations. 1 when
// units is 0 or the GEMMs do not fill one wave (the efficiency curve's small sizes hold that).
double wave_utilisation(int units, double m, double n, double count);

// Seconds for `count` GEMMs [m,k] x [k,n]: the FLOPs at peak x efficiency, never less than moving A,
// B and C once at the memory bandwidth (roofline).
double gemm_seconds(const ClusterSpec& cluster, Precision precision, double m, double n, double k, double count = 1);
// The FLOP part alone (operands on chip).
double gemm_compute_seconds(const ClusterSpec& cluster, Precision precision, double m, double n, double k,
                            double count = 1);

struct PassCompute {
  double flops = 0;
  double gemm_time = 0;
  double elementwise_time = 0;
  double overhead_time = 0;  // kernels x DeviceSpec::kernel_overhead
  double time() const { return gemm_time + elementwise_time + overhead_time; }
};

// Forward GEMM seconds of one layer by class (one micro-batch, one device), for the per-stage
// breakdown (LayoutEvaluator::stage_times); their sum is PassCompute::gemm_time.
struct GemmClasses {
  double qkv = 0;             // W_qkv
  double attention = 0;       // QK^T and PV, causal blocks
  double output = 0;          // W_o
  double ffn = 0;             // dense W1, W3, W2
  double router = 0;          // [T, d] x [d, E]
  double experts = 0;         // routed experts' W1, W3, W2 on the busiest device's rows
  double shared_experts = 0;  // shared experts' W1, W3, W2 on every token
  double sum() const { return qkv + attention + output + ffn + router + experts + shared_experts; }
};

struct LayerCompute {
  PassCompute forward;               // one micro-batch, one device
  GemmClasses gemms;                 // forward.gemm_time by class
  // Core attention (QK^T, softmax, PV): what selective recompute repeats (the runtime, like
  // Megatron's selective recompute, reruns the whole attention kernel to rebuild the probabilities).
  double attention_scores_time = 0;
  double gated_time = 0;             // SiLU * gate products: also repeated by selective recompute
  double expert_time = 0;            // forward time of the expert GEMMs (what a chunked all-to-all hides behind)
  // Backward work beyond 2 x forward: fused attention recomputes QK^T in its backward.
  double backward_extra = 0;
  // Memory-bound backward work beyond 2 x forward (negative where the backward moves less: the
  // square-attention softmax and dropout backward, see layer_compute).
  double backward_elementwise_extra = 0;
};

LayerCompute layer_compute(const ModelConfig& model, const TrainingSetup& setup, const Layout& layout,
                           const ClusterSpec& cluster, bool moe_layer);

// Forward of the LM head (final norm + [T,d] x [d,V/t] + cross-entropy) for one micro-batch.
PassCompute head_compute(const ModelConfig& model, const TrainingSetup& setup, const Layout& layout,
                         const ClusterSpec& cluster);

// Forward FLOPs of one sequence through the whole (unsharded) model, experts at top_k: the "model
// FLOPs" of MFU (training = 3x, recompute not counted).
double model_forward_flops_per_sequence(const ModelConfig& model, int seq_length);

}  // namespace moe4d
