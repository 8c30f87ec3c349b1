// config/config.h — the typed form of a moe4d YAML config (docs/config.md).
//
// `load_config` (config/config_loader.h) turns a YAML file into a Config, rejecting unknown keys,
// wrong types and out-of-range values with the key path and line. These structs carry no behaviour
// beyond a few derived quantities; every default below is the value a key takes when omitted.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace moe4d {

// How the router turns logits into expert scores (docs/moe.md): softmax over the experts, or an
// independent sigmoid per expert (DeepSeek-V3).
enum class RouterScore { kSoftmax, kSigmoid };
// Which statistics the load-balancing loss balances (Megatron-Core's --moe-router-load-balancing-type
// names): the micro-batch's, each sequence's (DeepSeek-V3's complementary sequence-wise loss), or the
// step's global batch so far (counts reduced over the data replicas, averaged over micro-batches).
enum class LoadBalancing { kAuxLoss, kSeqAuxLoss, kGlobalAuxLoss };

// How the expert all-to-all moves token rows (docs/moe.md): one copy per routed expert straight to
// its rank, or node-aware — one inter-node copy per (token, destination node), fanned out inside it.
enum class MoeDispatcher { kAllToAll, kHierarchical };

struct MoeConfig {
  int num_experts = 0;  // 0: dense model (every FFN is SwiGLU)
  int top_k = 2;
  int layer_freq = 1;   // layer l >= first_dense_layers is MoE iff l % layer_freq == layer_freq - 1
  int first_dense_layers = 0;     // layers 0 .. first_dense_layers-1 are dense (DeepSeek's first_k_dense_replace)
  int expert_ffn_hidden_size = 0;  // routed experts' SwiGLU width; 0: ffn_hidden_size
  int shared_experts = 0;          // always-on experts per MoE layer, fused into one SwiGLU
  int shared_expert_ffn_hidden_size = 0;  // width of one shared expert; 0: the routed experts' width
  // Layers kept dense whatever layer_freq and first_dense_layers say (Qwen3's mlp_only_layers).
  std::vector<int> dense_layers;
  RouterScore score_function = RouterScore::kSoftmax;
  bool normalize_top_k = true;     // the k picked scores are rescaled to sum to 1
  int num_groups = 1;              // group-limited routing: experts in num_groups contiguous groups (n_group)
  int group_topk = 1;              // groups a token picks its experts from (topk_group)
  double routed_scaling_factor = 1.0;  // pick weights multiplied by it after normalising
  LoadBalancing load_balancing_type = LoadBalancing::kAuxLoss;  // what aux_loss_coeff's loss balances
  std::optional<double> capacity_factor;  // nullopt (YAML null): dropless
  double aux_loss_coeff = 0.01;
  double z_loss_coeff = 0.0;
  double router_bias_update_rate = 0.0;  // > 0: aux-loss-free balancing bias (DeepSeek-V3)
  int a2a_chunks = 1;                    // slices of the expert all-to-all (overlap with expert compute)
  MoeDispatcher dispatcher = MoeDispatcher::kAllToAll;  // flat or node-aware (hierarchical) expert exchange
  int redundant_experts = 0;   // extra expert slots per MoE layer over the EP group (replicas of hot experts)
  int rebalance_interval = 0;  // steps between placements of the replicas (required with redundant_experts)

  bool operator==(const MoeConfig&) const = default;
};

// Multi-head latent attention (DeepSeek-V2/V3, docs/mla.md): on when kv_lora_rank > 0. Names as in
// Hugging Face's DeepseekV3Config.
struct MlaConfig {
  int q_lora_rank = 0;       // query compression rank; 0: a plain query projection (HF null)
  int kv_lora_rank = 0;      // joint key/value compression rank; > 0 turns MLA on
  int qk_nope_head_dim = 0;  // per-head query/key width without RoPE
  int qk_rope_head_dim = 0;  // per-head query width with RoPE (one rotary key shared by all heads)
  int v_head_dim = 0;        // per-head value width

  int qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  bool operator==(const MlaConfig&) const = default;
};

// YaRN RoPE scaling (Hugging Face rope_scaling with type yarn); off when factor is 0. The zeros of
// beta_fast, beta_slow, mscale stand for Hugging Face's defaults (32, 1, none).
struct RopeScaling {
  double factor = 0;
  int original_max_position_embeddings = 0;
  double beta_fast = 0;
  double beta_slow = 0;
  double mscale = 0;
  double mscale_all_dim = 0;

  bool enabled() const { return factor > 0; }
  bool operator==(const RopeScaling&) const = default;
};

struct ModelConfig {
  int vocab_size = 0;
  int hidden_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int ffn_hidden_size = 0;
  int seq_length = 0;
  bool tie_embeddings = false;
  int num_kv_heads = 0;       // grouped-query attention (1: multi-query); 0: num_heads
  double rope_theta = 10000.0;
  double norm_eps = 1e-5;     // RMSNorm epsilon
  int head_size = 0;          // model.head_dim: width of one attention head; 0: hidden_size / num_heads
  bool qk_norm = false;       // model.qk_layernorm: RMSNorm (weights [head_dim]) on each q and k head before RoPE
  MoeConfig moe;
  MlaConfig mla;
  RopeScaling rope_scaling;

  bool is_mla() const { return mla.kv_lora_rank > 0; }
  // Weights of one layer's attention projections that tensor parallelism splits by heads (W_qkv and
  // W_o; under MLA q_b or q, kv_b and W_o), and those every TP rank holds whole (MLA's q_a, kv_a).
  double attention_sharded_weights() const {
    const double d = hidden_size, h = num_heads;
    if (!is_mla()) return d * qkv_width() + double(attn_width()) * d;
    const double q_in = mla.q_lora_rank > 0 ? mla.q_lora_rank : d;
    return q_in * h * mla.qk_head_dim() + mla.kv_lora_rank * h * (mla.qk_nope_head_dim + mla.v_head_dim) +
           h * mla.v_head_dim * d;
  }
  double attention_replicated_weights() const {
    return is_mla() ? double(hidden_size) * (mla.q_lora_rank + mla.kv_lora_rank + mla.qk_rope_head_dim) : 0.0;
  }
  // MLA's latent RMSNorm weights of one layer (q_a_norm, kv_a_norm); 0 without MLA.
  double attention_latent_norm_weights() const { return is_mla() ? mla.q_lora_rank + mla.kv_lora_rank : 0.0; }
  int head_dim() const { return head_size > 0 ? head_size : hidden_size / num_heads; }
  // Width of the attention core's output (the rows of W_o): num_heads * head_dim (hidden_size unless
  // model.head_dim says otherwise).
  int attn_width() const { return num_heads * head_dim(); }
  int kv_heads() const { return num_kv_heads > 0 ? num_kv_heads : num_heads; }
  // Columns of W_qkv: every query head plus a key and a value head per KV head.
  int qkv_width() const { return (num_heads + 2 * kv_heads()) * head_dim(); }
  int expert_ffn() const { return moe.expert_ffn_hidden_size > 0 ? moe.expert_ffn_hidden_size : ffn_hidden_size; }
  // Width of the fused shared-expert SwiGLU of a MoE layer (0: none).
  int shared_ffn() const {
    return moe.shared_experts * (moe.shared_expert_ffn_hidden_size > 0 ? moe.shared_expert_ffn_hidden_size
                                                                        : expert_ffn());
  }
  bool is_moe() const { return moe.num_experts > 0; }
  bool is_moe_layer(int layer) const {
    return is_moe() && layer >= moe.first_dense_layers && layer % moe.layer_freq == moe.layer_freq - 1 &&
           std::find(moe.dense_layers.begin(), moe.dense_layers.end(), layer) == moe.dense_layers.end();
  }

  bool operator==(const ModelConfig&) const = default;
};

enum class RecomputeGranularity { kNone, kFull, kSelective };
enum class PipelineSchedule { kGPipe, k1F1B, kInterleaved };

struct ParallelConfig {
  int data_parallel = 1;
  int expert_parallel = 1;
  int tensor_parallel = 1;    // alias: model_parallel
  int pipeline_parallel = 1;  // alias: pipeline_stage
  int micro_batch_num = 1;    // micro-batches per data replica per step (gradient accumulation)
  int gradient_aggregation_group = 0;  // >0: number of gradient buckets per parameter group (MindFormers)
  // Elements per gradient bucket (0: max(40M, 1M x data-parallel group size), as Megatron-Core);
  // YAML also takes bytes ("64MiB"). Used when gradient_aggregation_group is 0 (docs/zero.md).
  int64_t grad_bucket_size = 0;
  int zero3_prefetch_buckets = 2;  // ZeRO-3: buckets (per group) of the next reads gathered ahead
  RecomputeGranularity recompute = RecomputeGranularity::kNone;  // `true` = full
  int zero_stage = 0;         // alias: enable_parallel_optimizer -> 1
  PipelineSchedule pipeline_schedule = PipelineSchedule::k1F1B;
  int virtual_pipeline = 1;   // model chunks per rank for the interleaved schedule
  std::vector<int> stage_layers;  // optional explicit layers per pipeline stage
  std::string rank_order = "tp-ep-dp-pp";  // fastest-varying dimension first
  std::vector<int> device_list;   // optional: grid position i runs on world rank device_list[i]
  int local_worker_num = 0;       // ranks per node (0: detect from MPI)
  double collective_timeout = 300.0;  // seconds before a missing rank is reported
  bool overlap_grad_reduce = true;    // launch bucket reductions during backward
  // Megatron-style sequence parallelism (alias: use_seq_parallel): outside the TP regions the
  // activations are sharded along the sequence over the TP ranks (docs/config.md).
  bool sequence_parallel = false;
  // Context parallelism (model/context_parallel.h): every sequence split over this many ranks, carved
  // out of the data replicas (dp x ep); the dense grid of a stage is tp x cp x dense_replicas().
  int context_parallel = 1;
  // The experts' own tensor parallelism (parallel folding); 0: tensor_parallel (the only value
  // supported today: parallel/layout_check.cc refuses another).
  int expert_tensor_parallel = 0;

  int world_size() const { return data_parallel * expert_parallel * tensor_parallel * pipeline_parallel; }
  int data_replicas() const { return data_parallel * expert_parallel; }  // EP is carved out of DP
  // Replicas reading different sequences: the data replicas over context parallelism (DP_dense).
  int dense_replicas() const { return data_replicas() / context_parallel; }

  bool operator==(const ParallelConfig&) const = default;
};

enum class Precision { kFP32, kBF16, kFP16 };
enum class GradCompression { kNone, kBF16, kFP16 };
enum class OptimizerKind { kAdamW, kOneBitAdam };
// The compute backend every kernel of a run executes on (backend/backend.h): the OpenBLAS / oneDNN
// kernels, or the plain-loop fp64-accumulating reference (slow; for checking on small models).
enum class ComputeBackend { kCpu, kReference };

struct LossScaleConfig {
  double initial = 65536.0;
  double factor = 2.0;
  int window = 1000;
  int hysteresis = 1;

  bool operator==(const LossScaleConfig&) const = default;
};

struct TrainConfig {
  int64_t global_batch_size = 0;  // sequences per optimizer step, over all data replicas
  int steps = 0;
  double lr = 3e-4;
  double min_lr = 3e-5;
  int warmup_steps = 0;
  double weight_decay = 0.1;
  double grad_clip = 1.0;  // 0 disables clipping
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  uint64_t seed = 1234;
  Precision precision = Precision::kFP32;
  ComputeBackend backend = ComputeBackend::kCpu;
  LossScaleConfig loss_scale;
  // Consecutive steps with a non-finite loss (or non-finite gradients that loss scaling cannot
  // absorb) after which the run stops with a diagnosis of the first non-finite tensor.
  int max_nonfinite_steps = 3;
  GradCompression grad_compression = GradCompression::kNone;
  OptimizerKind optimizer = OptimizerKind::kAdamW;
  int freeze_steps = 0;    // 1-bit Adam warm-up steps
  int log_interval = 1;    // steps between progress lines
  int eval_interval = 0;   // steps between validation evaluations (0: never)
  int eval_batches = 4;    // global batches of fixed validation windows per evaluation
  std::string metrics_file;  // JSONL; empty: Config::metrics_path()'s default
  std::string init_from;     // checkpoint whose weights start a fresh run (fresh optimizer, step 0)
  // Steps written to the Chrome Trace / Perfetto file <metrics folder>/trace.json.gz (docs/tracing.md),
  // ascending; YAML: a list or a range "first-last". Empty: no trace.
  std::vector<int> trace_steps;
  std::string tensorboard_dir;  // TensorBoard event files of every step; empty: none
  // Peak TFLOP/s of one rank's device at `precision` (a data sheet's dense figure, or moe4d's machine
  // survey); > 0 adds `mfu` to the metrics. 0: unknown.
  double peak_tflops = 0;

  bool operator==(const TrainConfig&) const = default;
};

// One source of a training blend (data.train as a list, or Megatron's "0.7 a 0.3 b").
struct DataSourceConfig {
  std::string path;
  double weight = 1.0;
  std::string format;  // "moe4d" | "megatron"; empty: data.format

  bool operator==(const DataSourceConfig&) const = default;
};

struct DataConfig {
  std::string train;      // token shard (.bin with .json header) written by `moe4d prepare`; the first source
  std::string valid;      // optional
  std::string tokenizer;  // sentencepiece .model, or "bytes"
  std::string format = "moe4d";                // of valid and of train sources without their own
  std::vector<DataSourceConfig> train_sources;  // every source of data.train (one for a plain path)

  bool operator==(const DataConfig&) const = default;
};

// full: rank 0 gathers and writes whole tensors; sharded: every rank writes the pieces it owns
// (docs/checkpoints.md).
enum class CheckpointFormat { kFull, kSharded };

struct CheckpointConfig {
  std::string dir;   // empty: no checkpoints
  CheckpointFormat format = CheckpointFormat::kFull;
  int interval = 0;  // steps between checkpoints (0: only at the end)
  int keep = 2;      // most recent checkpoints kept
  double timeout = 600.0;  // seconds the ranks wait for rank 0's checkpoint write (not collective_timeout)
  bool async = false;      // sharded only: stage a copy, write it in the background while training continues

  bool operator==(const CheckpointConfig&) const = default;
};

struct Config {
  ModelConfig model;
  ParallelConfig parallel;
  TrainConfig train;
  DataConfig data;
  CheckpointConfig checkpoint;
  std::string source;  // the file it was read from (for messages)

  // Where the metrics go: train.metrics_file, by default metrics.jsonl in checkpoint.dir (or in the
  // working directory without one). The one place this default is spelled.
  std::string metrics_path() const {
    if (!train.metrics_file.empty()) return train.metrics_file;
    return checkpoint.dir.empty() ? "metrics.jsonl" : checkpoint.dir + "/metrics.jsonl";
  }

  bool operator==(const Config&) const = default;
};

}  // namespace moe4d
