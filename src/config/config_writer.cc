// config/config_writer.cc — Config -> YAML (config_to_yaml), which parse_config reads back to an
// equal Config: every field, enums spelled as the reader accepts them, doubles in their shortest
// round-trip form.
#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config_loader.h"
#include "config/config_reader.h"

namespace moe4d {
namespace {

using namespace config_detail;

// Writes `key: value` pairs into the YAML map being emitted.
class MapWriter {
 public:
  explicit MapWriter(YAML::Emitter& out) : out_(out) {}

  template <typename T>
  MapWriter& operator()(const char* key, const T& value) {
    out_ << YAML::Key << key << YAML::Value << value;
    return *this;
  }
  // fmt's shortest round-trip form, so that parse_config reads back the exact same double.
  MapWriter& operator()(const char* key, double value) { return (*this)(key, fmt::format("{}", value)); }
  MapWriter& operator()(const char* key, std::string_view value) { return (*this)(key, std::string(value)); }
  MapWriter& operator()(const char* key, const std::optional<double>& value) {
    if (value) return (*this)(key, *value);
    out_ << YAML::Key << key << YAML::Value << YAML::Null;
    return *this;
  }
  MapWriter& operator()(const char* key, const std::vector<int>& values) {
    out_ << YAML::Key << key << YAML::Value << YAML::Flow << values;
    return *this;
  }

 private:
  YAML::Emitter& out_;
};
}  // namespace

std::string config_to_yaml(const Config& c) {
  YAML::Emitter out;
  MapWriter put(out);
  const ModelConfig& m = c.model;
  out << YAML::BeginMap << YAML::Key << "model" << YAML::Value << YAML::BeginMap;
  put("vocab_size", m.vocab_size)("hidden_size", m.hidden_size)("num_layers", m.num_layers)("num_heads", m.num_heads);
  put("ffn_hidden_size", m.ffn_hidden_size)("seq_length", m.seq_length)("tie_embeddings", m.tie_embeddings);
  put("num_kv_heads", m.kv_heads())("rope_theta", m.rope_theta)("norm_eps", m.norm_eps);
  out << YAML::Key << "moe" << YAML::Value << YAML::BeginMap;
  put("num_experts", m.moe.num_experts)("top_k", m.moe.top_k)("layer_freq", m.moe.layer_freq);
  put("capacity_factor", m.moe.capacity_factor)("aux_loss_coeff", m.moe.aux_loss_coeff);
  put("z_loss_coeff", m.moe.z_loss_coeff)("router_bias_update_rate", m.moe.router_bias_update_rate);
  put("a2a_chunks", m.moe.a2a_chunks);
  if (m.moe.redundant_experts > 0)
    put("redundant_experts", m.moe.redundant_experts)("rebalance_interval", m.moe.rebalance_interval);
  if (m.is_moe()) {
    put("first_dense_layers", m.moe.first_dense_layers)("expert_ffn_hidden_size", m.expert_ffn());
    put("shared_experts", m.moe.shared_experts);
    if (m.moe.shared_experts > 0) put("shared_expert_ffn_hidden_size", m.shared_ffn() / m.moe.shared_experts);
    put("score_function", name_of(kRouterScoreNames, m.moe.score_function));
    put("normalize_top_k", m.moe.normalize_top_k);
  }
  out << YAML::EndMap << YAML::EndMap;

  const ParallelConfig& p = c.parallel;
  out << YAML::Key << "parallel_config" << YAML::Value << YAML::BeginMap;
  put("data_parallel", p.data_parallel)("expert_parallel", p.expert_parallel);
  put("tensor_parallel", p.tensor_parallel)("pipeline_parallel", p.pipeline_parallel);
  put("micro_batch_num", p.micro_batch_num);
  // Only the bucketing that was chosen: the two keys are refused together.
  if (p.gradient_aggregation_group > 0) put("gradient_aggregation_group", p.gradient_aggregation_group);
  if (p.grad_bucket_size > 0) put("grad_bucket_size", p.grad_bucket_size);
  put("zero3_prefetch_buckets", p.zero3_prefetch_buckets);
  out << YAML::Key << "recompute" << YAML::Value;
  if (p.recompute == RecomputeGranularity::kSelective)
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "granularity" << YAML::Value << "selective" << YAML::EndMap;
  else
    out << (p.recompute == RecomputeGranularity::kFull);
  put("zero_stage", p.zero_stage)("pipeline_schedule", name_of(kScheduleNames, p.pipeline_schedule));
  put("virtual_pipeline", p.virtual_pipeline)("stage_layers", p.stage_layers)("rank_order", p.rank_order);
  put("device_list", p.device_list)("local_worker_num", p.local_worker_num);
  put("collective_timeout", p.collective_timeout)("overlap_grad_reduce", p.overlap_grad_reduce);
  put("sequence_parallel", p.sequence_parallel);
  out << YAML::EndMap;

  const TrainConfig& t = c.train;
  out << YAML::Key << "train" << YAML::Value << YAML::BeginMap;
  put("global_batch_size", t.global_batch_size)("steps", t.steps)("lr", t.lr)("min_lr", t.min_lr);
  put("warmup_steps", t.warmup_steps)("weight_decay", t.weight_decay)("grad_clip", t.grad_clip);
  put("beta1", t.beta1)("beta2", t.beta2)("eps", t.eps)("seed", t.seed);
  put("precision", name_of(kPrecisionNames, t.precision))("backend", name_of(kBackendNames, t.backend));
  out << YAML::Key << "loss_scale" << YAML::Value << YAML::BeginMap;
  put("initial", t.loss_scale.initial)("factor", t.loss_scale.factor)("window", t.loss_scale.window);
  put("hysteresis", t.loss_scale.hysteresis);
  out << YAML::EndMap;
  put("max_nonfinite_steps", t.max_nonfinite_steps);
  put("grad_compression", name_of(kGradCompressionNames, t.grad_compression));
  put("optimizer", name_of(kOptimizerNames, t.optimizer))("freeze_steps", t.freeze_steps);
  put("log_interval", t.log_interval)("eval_interval", t.eval_interval)("eval_batches", t.eval_batches);
  put("metrics_file", t.metrics_file);
  put("init_from", t.init_from);
  put("trace_steps", t.trace_steps)("tensorboard_dir", t.tensorboard_dir)("peak_tflops", t.peak_tflops);
  out << YAML::EndMap;

  out << YAML::Key << "data" << YAML::Value << YAML::BeginMap;
  const bool plain_train = c.data.train_sources.size() <= 1 &&
                           (c.data.train_sources.empty() ||
                            (c.data.train_sources[0].weight == 1.0 && c.data.train_sources[0].format.empty()));
  if (plain_train) {
    put("train", c.data.train);
  } else {
    out << YAML::Key << "train" << YAML::Value << YAML::BeginSeq;
    for (const DataSourceConfig& s : c.data.train_sources) {
      out << YAML::Flow << YAML::BeginMap;
      put("path", s.path)("weight", s.weight);
      if (!s.format.empty()) put("format", s.format);
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
  put("valid", c.data.valid)("tokenizer", c.data.tokenizer)("format", c.data.format);
  out << YAML::EndMap << YAML::Key << "checkpoint" << YAML::Value << YAML::BeginMap;
  put("dir", c.checkpoint.dir)("interval", c.checkpoint.interval)("keep", c.checkpoint.keep);
  put("timeout", c.checkpoint.timeout);
  put("format", name_of(kCheckpointFormatNames, c.checkpoint.format));
  out << YAML::EndMap << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace moe4d
