// config/config_keys.cc — the table of config keys (see config_keys.h for how to add one).
#include "config/config_keys.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "config/config_names.h"
#include "core/error.h"

namespace moe4d {
namespace {

// The field of a key: FIELD(model.hidden_size) is `&config.model.hidden_size`.
#define FIELD(member) [](Config& config) -> ConfigField { return &config.member; }

constexpr unsigned kRequired = kKeyRequired, kMoeOnly = kKeyMoeOnly, kMoeRange = kKeyMoeRange, kIfGiven = kKeyIfGiven,
                   kOmitZero = kKeyOmitZero, kCustom = kKeyCustom, kSection = kKeySection,
                   kListEntry = kKeyListEntry;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr ValueRange kAny{};
constexpr ValueRange kPositive{0, kInf, true, false};
constexpr ValueRange kNonNegative{0, kInf, false, false};
constexpr ValueRange kUnitOpen{0, 1, true, true};      // (0, 1)
constexpr ValueRange kUnitHalfOpen{0, 1, false, true};  // [0, 1)

// Columns: path, field, flags, range, expected (empty: "a positive integer" and the like from the
// range and the type), excludes, alias_of, doc.
const ConfigKey kKeys[] = {
    {"model", nullptr, kSection, kAny, "", "", "", "the network"},
    {"model.vocab_size", FIELD(model.vocab_size), kRequired, kPositive, "", "", "", "embedding rows"},
    {"model.hidden_size", FIELD(model.hidden_size), kRequired, kPositive, "", "", "", "d"},
    {"model.num_layers", FIELD(model.num_layers), kRequired, kPositive, "", "", "", "transformer layers"},
    {"model.num_heads", FIELD(model.num_heads), kRequired, kPositive, "", "", "", "attention heads"},
    {"model.ffn_hidden_size", FIELD(model.ffn_hidden_size), kRequired, kPositive, "", "", "",
     "SwiGLU width of the dense FFNs"},
    {"model.seq_length", FIELD(model.seq_length), kRequired, kPositive, "", "", "", "tokens per sequence"},
    {"model.tie_embeddings", FIELD(model.tie_embeddings), 0, kAny, "", "", "", "head = embedding table transposed"},
    {"model.num_kv_heads", FIELD(model.num_kv_heads), kIfGiven, kPositive,
     "a positive integer (1: multi-query attention)", "", "", "key/value heads (grouped-query attention)"},
    {"model.rope_theta", FIELD(model.rope_theta), 0, kPositive, "", "", "", "RoPE base"},
    {"model.q_lora_rank", FIELD(model.mla.q_lora_rank), kIfGiven | kOmitZero, kPositive, "", "", "",
     "MLA query compression rank (absent: plain query projection)"},
    {"model.kv_lora_rank", FIELD(model.mla.kv_lora_rank), kIfGiven | kOmitZero, kPositive, "", "", "",
     "MLA key/value compression rank; given: multi-head latent attention"},
    {"model.qk_nope_head_dim", FIELD(model.mla.qk_nope_head_dim), kIfGiven | kOmitZero, kPositive, "", "", "",
     "MLA per-head query/key width without RoPE"},
    {"model.qk_rope_head_dim", FIELD(model.mla.qk_rope_head_dim), kIfGiven | kOmitZero, kPositive, "", "", "",
     "MLA per-head rotary width (one shared rotary key)"},
    {"model.v_head_dim", FIELD(model.mla.v_head_dim), kIfGiven | kOmitZero, kPositive, "", "", "",
     "MLA per-head value width"},
    {"model.rope_scaling", nullptr, kSection, kAny, "", "", "", "YaRN RoPE scaling"},
    {"model.rope_scaling.factor", FIELD(model.rope_scaling.factor), kIfGiven | kOmitZero, kPositive, "", "", "",
     "context extension factor (absent: no scaling)"},
    {"model.rope_scaling.original_max_position_embeddings",
     FIELD(model.rope_scaling.original_max_position_embeddings), kIfGiven | kOmitZero, kPositive, "", "", "",
     "context length before scaling"},
    {"model.rope_scaling.beta_fast", FIELD(model.rope_scaling.beta_fast), kIfGiven | kOmitZero, kPositive, "", "",
     "", "YaRN high-frequency bound (absent: 32)"},
    {"model.rope_scaling.beta_slow", FIELD(model.rope_scaling.beta_slow), kIfGiven | kOmitZero, kPositive, "", "",
     "", "YaRN low-frequency bound (absent: 1)"},
    {"model.rope_scaling.mscale", FIELD(model.rope_scaling.mscale), kIfGiven | kOmitZero, kPositive, "", "", "",
     "YaRN attention factor numerator coefficient"},
    {"model.rope_scaling.mscale_all_dim", FIELD(model.rope_scaling.mscale_all_dim), kIfGiven | kOmitZero, kPositive,
     "", "", "", "YaRN mscale of the MLA softmax scale"},
    {"model.norm_eps", FIELD(model.norm_eps), 0, kUnitOpen, "a number in (0, 1)", "", "", "RMSNorm epsilon"},
    {"model.head_dim", FIELD(model.head_size), kIfGiven | kOmitZero, kPositive, "", "", "",
     "width of one attention head (default hidden_size / num_heads)"},
    {"model.qk_layernorm", FIELD(model.qk_norm), 0, kAny, "", "", "", "RMSNorm on each query and key head"},
    {"model.moe", nullptr, kSection, kAny, "", "", "", "mixture of experts"},
    {"model.moe.num_experts", FIELD(model.moe.num_experts), 0, kNonNegative, "a non-negative integer (0: dense)", "",
     "", "routed experts per MoE layer (0: dense model)"},
    {"model.moe.top_k", FIELD(model.moe.top_k), 0, kAny, "", "", "", "experts per token"},
    {"model.moe.layer_freq", FIELD(model.moe.layer_freq), kMoeRange, kPositive, "", "", "",
     "layer l is MoE iff l % layer_freq == layer_freq - 1"},
    {"model.moe.capacity_factor", FIELD(model.moe.capacity_factor), kMoeRange, kPositive,
     "null (dropless) or a positive number", "", "", "null: dropless"},
    {"model.moe.aux_loss_coeff", FIELD(model.moe.aux_loss_coeff), kMoeRange, kNonNegative, "", "", "",
     "load-balancing loss weight"},
    {"model.moe.z_loss_coeff", FIELD(model.moe.z_loss_coeff), kMoeRange, kNonNegative, "", "", "",
     "router z-loss weight"},
    {"model.moe.router_bias_update_rate", FIELD(model.moe.router_bias_update_rate), kMoeRange, kNonNegative, "", "",
     "", "aux-loss-free balancing step (0: off)"},
    {"model.moe.a2a_chunks", FIELD(model.moe.a2a_chunks), kMoeRange, kPositive, "", "", "",
     "slices of the expert all-to-all"},
    {"model.moe.dispatcher", FIELD(model.moe.dispatcher), kMoeOnly, kAny, "", "", "",
     "expert all-to-all: flat or node-aware (hierarchical)"},
    {"model.moe.first_dense_layers", FIELD(model.moe.first_dense_layers), kMoeOnly, kAny, "", "", "",
     "leading dense layers"},
    {"model.moe.dense_layers", FIELD(model.moe.dense_layers), kMoeOnly, kNonNegative, "", "", "",
     "layers kept dense (Qwen3's mlp_only_layers)"},
    {"model.moe.expert_ffn_hidden_size", FIELD(model.moe.expert_ffn_hidden_size), kMoeOnly | kMoeRange | kIfGiven,
     kPositive, "", "", "", "routed experts' SwiGLU width"},
    {"model.moe.shared_experts", FIELD(model.moe.shared_experts), kMoeOnly | kMoeRange, kNonNegative, "", "", "",
     "always-on experts per MoE layer"},
    {"model.moe.shared_expert_ffn_hidden_size", FIELD(model.moe.shared_expert_ffn_hidden_size),
     kMoeOnly | kMoeRange | kIfGiven | kOmitZero, kPositive, "", "", "", "width of one shared expert"},
    {"model.moe.score_function", FIELD(model.moe.score_function), kMoeOnly, kAny, "", "", "", "router scores"},
    {"model.moe.normalize_top_k", FIELD(model.moe.normalize_top_k), kMoeOnly, kAny, "", "", "",
     "rescale the picked scores to sum 1"},
    {"model.moe.num_groups", FIELD(model.moe.num_groups), kMoeOnly | kMoeRange, kPositive, "", "", "",
     "group-limited routing: contiguous expert groups (n_group; 1: no limit)"},
    {"model.moe.group_topk", FIELD(model.moe.group_topk), kMoeOnly | kMoeRange, kPositive, "", "", "",
     "groups a token picks its experts from (topk_group)"},
    {"model.moe.routed_scaling_factor", FIELD(model.moe.routed_scaling_factor), kMoeOnly | kMoeRange, kPositive, "",
     "", "", "pick weights multiplied by it after normalising"},
    {"model.moe.load_balancing_type", FIELD(model.moe.load_balancing_type), kMoeOnly, kAny, "", "", "",
     "statistics aux_loss_coeff's loss balances"},
    {"model.moe.redundant_experts", FIELD(model.moe.redundant_experts), kMoeOnly | kMoeRange | kOmitZero,
     kNonNegative, "", "", "", "extra expert slots holding replicas of hot experts"},
    {"model.moe.rebalance_interval", FIELD(model.moe.rebalance_interval), kMoeOnly | kMoeRange | kOmitZero,
     kNonNegative, "", "", "", "steps between replica placements"},

    {"parallel_config", nullptr, kSection, kAny, "", "", "", "the parallel layout"},
    {"parallel_config.data_parallel", FIELD(parallel.data_parallel), 0, kPositive, "", "", "", "DP"},
    {"parallel_config.expert_parallel", FIELD(parallel.expert_parallel), 0, kPositive, "", "", "", "EP"},
    {"parallel_config.tensor_parallel", FIELD(parallel.tensor_parallel), 0, kPositive, "", "", "", "TP"},
    {"parallel_config.pipeline_parallel", FIELD(parallel.pipeline_parallel), 0, kPositive, "", "", "", "PP"},
    {"parallel_config.micro_batch_num", FIELD(parallel.micro_batch_num), 0, kPositive, "", "", "",
     "micro-batches per data replica per step"},
    {"parallel_config.gradient_aggregation_group", FIELD(parallel.gradient_aggregation_group), kOmitZero,
     kNonNegative, "a positive bucket count (or 0: buckets by grad_bucket_size)", "", "",
     "gradient buckets per parameter group"},
    {"parallel_config.grad_bucket_size", FIELD(parallel.grad_bucket_size), kCustom | kOmitZero, kNonNegative,
     "a positive element count (or 0: the default)", "gradient_aggregation_group", "",
     "elements (or bytes with a unit) per gradient bucket"},
    {"parallel_config.zero3_prefetch_buckets", FIELD(parallel.zero3_prefetch_buckets), 0, kNonNegative, "", "", "",
     "ZeRO-3 buckets gathered ahead"},
    {"parallel_config.recompute", nullptr, kCustom, kAny, "", "", "", "activation recompute"},
    {"parallel_config.recompute.granularity", FIELD(parallel.recompute), kRequired, kAny, "", "", "",
     "full or selective"},
    {"parallel_config.zero_stage", FIELD(parallel.zero_stage), 0, {0, 3}, "one of 0, 1, 2, 3", "", "",
     "ZeRO sharding stage"},
    {"parallel_config.pipeline_schedule", FIELD(parallel.pipeline_schedule), 0, kAny, "", "", "",
     "pipeline schedule"},
    {"parallel_config.virtual_pipeline", FIELD(parallel.virtual_pipeline), 0, kPositive, "", "", "",
     "model chunks per rank (interleaved)"},
    {"parallel_config.stage_layers", FIELD(parallel.stage_layers), 0, kPositive, "", "", "",
     "layers per pipeline stage"},
    {"parallel_config.rank_order", FIELD(parallel.rank_order), 0, kAny, "", "", "",
     "order of the grid dimensions, fastest first"},
    {"parallel_config.device_list", FIELD(parallel.device_list), 0, kNonNegative, "", "", "",
     "world rank of each grid position"},
    {"parallel_config.local_worker_num", FIELD(parallel.local_worker_num), 0, kNonNegative, "", "", "",
     "ranks per node (0: detect)"},
    {"parallel_config.collective_timeout", FIELD(parallel.collective_timeout), 0, kPositive,
     "a positive number of seconds", "", "", "deadline of every collective"},
    {"parallel_config.overlap_grad_reduce", FIELD(parallel.overlap_grad_reduce), 0, kAny, "", "", "",
     "launch bucket reductions during backward"},
    {"parallel_config.model_parallel", nullptr, 0, kAny, "", "tensor_parallel", "tensor_parallel",
     "MindFormers' tensor_parallel"},
    {"parallel_config.pipeline_stage", nullptr, 0, kAny, "", "pipeline_parallel", "pipeline_parallel",
     "MindFormers' pipeline_parallel"},
    {"parallel_config.enable_parallel_optimizer", nullptr, kCustom, kAny, "", "zero_stage", "zero_stage",
     "MindFormers: true = zero_stage 1"},
    {"parallel_config.sequence_parallel", FIELD(parallel.sequence_parallel), 0, kAny, "", "", "",
     "Megatron-style sequence parallelism"},
    {"parallel_config.use_seq_parallel", nullptr, 0, kAny, "", "sequence_parallel", "sequence_parallel",
     "MindFormers' sequence_parallel"},
    {"parallel_config.context_parallel", FIELD(parallel.context_parallel), 0, kPositive, "", "", "",
     "CP: ranks splitting every sequence"},
    {"parallel_config.expert_tensor_parallel", FIELD(parallel.expert_tensor_parallel), kOmitZero, kNonNegative,
     "a positive integer (or 0: tensor_parallel)", "", "", "ETP: the experts' tensor parallelism"},

    {"train", nullptr, kSection, kAny, "", "", "", "the optimisation"},
    {"train.global_batch_size", FIELD(train.global_batch_size), kRequired, kPositive, "", "", "",
     "sequences per optimizer step"},
    {"train.steps", FIELD(train.steps), kRequired, kPositive, "", "", "", "optimizer steps"},
    {"train.lr", FIELD(train.lr), 0, kPositive, "", "", "", "peak learning rate"},
    {"train.min_lr", FIELD(train.min_lr), 0, kNonNegative, "", "", "", "final learning rate"},
    {"train.warmup_steps", FIELD(train.warmup_steps), 0, kNonNegative, "", "", "", "linear warm-up steps"},
    {"train.weight_decay", FIELD(train.weight_decay), 0, kNonNegative, "", "", "", "AdamW decoupled decay"},
    {"train.grad_clip", FIELD(train.grad_clip), 0, kNonNegative, "a non-negative number (0: no clipping)", "", "",
     "global-norm clipping"},
    {"train.beta1", FIELD(train.beta1), 0, kUnitHalfOpen, "a number in [0, 1)", "", "", "AdamW beta1"},
    {"train.beta2", FIELD(train.beta2), 0, kUnitHalfOpen, "a number in [0, 1)", "", "", "AdamW beta2"},
    {"train.eps", FIELD(train.eps), 0, kPositive, "", "", "", "AdamW epsilon"},
    {"train.seed", FIELD(train.seed), 0, kAny, "", "", "", "initialisation and data order"},
    {"train.precision", FIELD(train.precision), 0, kAny, "", "", "", "GEMM precision"},
    {"train.backend", FIELD(train.backend), 0, kAny, "", "", "", "compute backend (cpu or reference)"},
    {"train.loss_scale", nullptr, kSection, kAny, "", "", "", "dynamic loss scaling"},
    {"train.loss_scale.initial", FIELD(train.loss_scale.initial), 0, kPositive, "", "", "", "first scale"},
    {"train.loss_scale.factor", FIELD(train.loss_scale.factor), 0, {1, kInf, true, false}, "a number > 1", "", "",
     "growth and back-off factor"},
    {"train.loss_scale.window", FIELD(train.loss_scale.window), 0, kPositive, "", "", "",
     "finite steps before growing"},
    {"train.loss_scale.hysteresis", FIELD(train.loss_scale.hysteresis), 0, kPositive, "", "", "",
     "overflows before backing off"},
    {"train.max_nonfinite_steps", FIELD(train.max_nonfinite_steps), 0, kPositive, "", "", "",
     "non-finite steps before the run stops"},
    {"train.grad_compression", FIELD(train.grad_compression), 0, kAny, "", "", "",
     "precision of the gradient reduction"},
    {"train.optimizer", FIELD(train.optimizer), 0, kAny, "", "", "", "optimizer"},
    {"train.freeze_steps", FIELD(train.freeze_steps), 0, kNonNegative, "", "", "", "1-bit Adam warm-up"},
    {"train.log_interval", FIELD(train.log_interval), 0, kPositive, "", "", "", "steps between progress lines"},
    {"train.eval_interval", FIELD(train.eval_interval), 0, kNonNegative, "", "", "",
     "steps between validations (0: never)"},
    {"train.eval_batches", FIELD(train.eval_batches), 0, kPositive, "", "", "", "global batches per validation"},
    {"train.metrics_file", FIELD(train.metrics_file), 0, kAny, "", "", "", "JSONL metrics"},
    {"train.init_from", FIELD(train.init_from), 0, kAny, "", "", "", "checkpoint whose weights start the run"},
    {"train.trace_steps", FIELD(train.trace_steps), kCustom, kAny, "", "", "", "steps traced"},
    {"train.tensorboard_dir", FIELD(train.tensorboard_dir), 0, kAny, "", "", "", "TensorBoard event files"},
    {"train.peak_tflops", FIELD(train.peak_tflops), 0, kNonNegative,
     "a non-negative number (TFLOP/s of one rank's device; 0: unknown)", "", "", "peak TFLOP/s of one rank"},

    {"data", nullptr, kSection, kAny, "", "", "", "the token shards"},
    {"data.train", FIELD(data.train), kCustom | kRequired, kAny, "", "", "", "token shard, or a blend"},
    {"data.train[].path", nullptr, kListEntry | kRequired, kAny, "", "", "", "a blend source's shard"},
    {"data.train[].weight", nullptr, kListEntry, kAny, "", "", "", "its weight"},
    {"data.train[].format", nullptr, kListEntry, kAny, "", "", "", "its format"},
    {"data.valid", FIELD(data.valid), 0, kAny, "", "", "", "validation shard"},
    {"data.tokenizer", FIELD(data.tokenizer), 0, kAny, "", "", "", "sentencepiece .model or bytes"},
    {"data.format", FIELD(data.format), 0, kAny, "", "", "", "moe4d or megatron"},

    {"checkpoint", nullptr, kSection, kAny, "", "", "", "checkpoints"},
    {"checkpoint.dir", FIELD(checkpoint.dir), 0, kAny, "", "", "", "checkpoint root (empty: none)"},
    {"checkpoint.interval", FIELD(checkpoint.interval), 0, kNonNegative, "", "", "",
     "steps between checkpoints"},
    {"checkpoint.keep", FIELD(checkpoint.keep), 0, kPositive, "", "", "", "most recent checkpoints kept"},
    {"checkpoint.timeout", FIELD(checkpoint.timeout), 0, kPositive, "a positive number of seconds", "", "",
     "seconds to wait for rank 0's write"},
    {"checkpoint.format", FIELD(checkpoint.format), 0, kAny, "", "", "", "full or sharded"},
    {"checkpoint.async", FIELD(checkpoint.async), 0, kAny, "", "", "", "write sharded checkpoints in the background"},
};

#undef FIELD

}  // namespace

std::span<const ConfigKey> config_keys() { return kKeys; }

const ConfigKey* find_config_key(std::string_view path) {
  for (const ConfigKey& key : kKeys)
    if (key.path == path) return &key;
  return nullptr;
}

std::string_view config_key_path(const Config& config, const void* field) {
  Config& fields = const_cast<Config&>(config);  // only compared: key.field takes a mutable Config
  for (const ConfigKey& key : kKeys) {
    if (!key.field || !key.alias_of.empty()) continue;
    if (std::visit([](auto* p) -> const void* { return p; }, key.field(fields)) == field) return key.path;
  }
  fail("internal error: no config key holds the field at {}", field);
}

std::string_view config_key_leaf(std::string_view path) {
  const size_t dot = path.rfind('.');
  return dot == std::string_view::npos ? path : path.substr(dot + 1);
}

std::string_view config_key_parent(std::string_view path) {
  const size_t dot = path.rfind('.');
  return dot == std::string_view::npos ? std::string_view() : path.substr(0, dot);
}

std::vector<std::string> config_section_keys(std::string_view section) {
  std::vector<std::string> out;
  for (const ConfigKey& key : kKeys)
    if (config_key_parent(key.path) == section) out.emplace_back(config_key_leaf(key.path));
  return out;
}

std::string config_key_type(const ConfigKey& key) {
  if (key.flags & kSection) return "section";
  if (!key.field) return "custom";
  Config config;
  return std::visit(
      [](auto* p) -> std::string {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_enum_v<T>) {
          std::string out;
          for (const auto& [name, value] : config_names::names_for(p)) out += fmt::format("{}{}", out.empty() ? "" : "|", name);
          return out;
        } else if constexpr (std::is_same_v<T, bool>) {
          return "bool";
        } else if constexpr (std::is_integral_v<T>) {
          return "int";
        } else if constexpr (std::is_same_v<T, double>) {
          return "number";
        } else if constexpr (std::is_same_v<T, std::optional<double>>) {
          return "number or null";
        } else if constexpr (std::is_same_v<T, std::string>) {
          return "string";
        } else {
          return "list of int";
        }
      },
      key.field(config));
}

std::string config_key_default(const ConfigKey& key) {
  if (!key.field) return "";
  Config config;
  return std::visit(
      [](auto* p) -> std::string {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_enum_v<T>) {
          return std::string(config_names::name_of(config_names::names_for(p), *p));
        } else if constexpr (std::is_same_v<T, std::optional<double>>) {
          return *p ? fmt::format("{}", **p) : "null";
        } else if constexpr (std::is_same_v<T, std::vector<int>>) {
          return fmt::format("[{}]", fmt::join(*p, ", "));
        } else {
          return fmt::format("{}", *p);
        }
      },
      key.field(config));
}

}  // namespace moe4d
