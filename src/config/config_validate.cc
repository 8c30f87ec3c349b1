// config/config_validate.cc — pass 2 of the config loader: ranges and cross-field rules on the typed
// Config, quoting each value as the user wrote it (the lines come from pass 1's ConfigReader).
#include <cmath>
#include <set>
#include <sstream>
#include <string>

#include "config/config_reader.h"

namespace moe4d::config_detail {
namespace {

bool is_rank_order(const std::string& order) {
  std::set<std::string> dims;
  std::stringstream stream(order);
  std::string part;
  while (std::getline(stream, part, '-')) dims.insert(part);
  return order.size() == 11 && dims == std::set<std::string>{"tp", "ep", "dp", "pp"};
}

}  // namespace

// Pass 2: ranges and cross-field rules of one model (no parallel layout arithmetic here).
void validate(const Config& c, const ConfigReader& r) {
  const auto str = [](auto v) { return fmt::format("{}", v); };
  const auto positive = [&](const std::string& path, auto v) { r.require(v > 0, path, "a positive integer", str(v)); };
  const auto non_negative = [&](const std::string& path, auto v) {
    r.require(v >= 0, path, "a non-negative integer", str(v));
  };

  const ModelConfig& m = c.model;
  positive("model.vocab_size", m.vocab_size);
  positive("model.hidden_size", m.hidden_size);
  positive("model.num_layers", m.num_layers);
  positive("model.num_heads", m.num_heads);
  positive("model.ffn_hidden_size", m.ffn_hidden_size);
  positive("model.seq_length", m.seq_length);
  if (m.hidden_size % m.num_heads != 0)
    r.fail_at(r.line_of("model.num_heads"), "model.num_heads",
              fmt::format("{} does not divide hidden_size {}", m.num_heads, m.hidden_size));
  if (m.head_dim() % 2 != 0)
    r.fail_at(r.line_of("model.num_heads"), "model.num_heads",
              fmt::format("head dimension hidden_size / num_heads = {} / {} = {} is odd, expected an even head "
                          "dimension (RoPE rotates pairs)",
                          m.hidden_size, m.num_heads, m.head_dim()));
  if (r.find("model.num_kv_heads")) {
    r.require(m.num_kv_heads > 0, "model.num_kv_heads", "a positive integer (1: multi-query attention)",
              str(m.num_kv_heads));
    if (m.num_heads % m.num_kv_heads != 0)
      r.fail_at(r.line_of("model.num_kv_heads"), "model.num_kv_heads",
                fmt::format("{} does not divide num_heads {}, expected a divisor (each KV head serves num_heads / "
                            "num_kv_heads query heads)",
                            m.num_kv_heads, m.num_heads));
  }
  r.require(m.rope_theta > 0 && std::isfinite(m.rope_theta), "model.rope_theta", "a positive number",
            str(m.rope_theta));
  r.require(m.norm_eps > 0 && m.norm_eps < 1, "model.norm_eps", "a number in (0, 1)", str(m.norm_eps));
  const MoeConfig& moe = m.moe;
  r.require(moe.num_experts >= 0, "model.moe.num_experts", "a non-negative integer (0: dense)", str(moe.num_experts));
  if (moe.num_experts > 0) {
    r.require(moe.top_k >= 1 && moe.top_k <= moe.num_experts, "model.moe.top_k",
              fmt::format("an integer in [1, num_experts = {}]", moe.num_experts), str(moe.top_k));
    positive("model.moe.layer_freq", moe.layer_freq);
    r.require(!moe.capacity_factor || *moe.capacity_factor > 0, "model.moe.capacity_factor",
              "null (dropless) or a positive number", moe.capacity_factor ? str(*moe.capacity_factor) : "null");
    for (const auto& [path, v] : {std::pair{"model.moe.aux_loss_coeff", moe.aux_loss_coeff},
                                  std::pair{"model.moe.z_loss_coeff", moe.z_loss_coeff},
                                  std::pair{"model.moe.router_bias_update_rate", moe.router_bias_update_rate}})
      r.require(v >= 0, path, "a non-negative number", str(v));
    positive("model.moe.a2a_chunks", moe.a2a_chunks);
    r.require(moe.first_dense_layers >= 0 && moe.first_dense_layers < m.num_layers, "model.moe.first_dense_layers",
              fmt::format("an integer in [0, num_layers = {}) (at least one layer must stay MoE)", m.num_layers),
              str(moe.first_dense_layers));
    if (r.find("model.moe.expert_ffn_hidden_size"))
      positive("model.moe.expert_ffn_hidden_size", moe.expert_ffn_hidden_size);
    non_negative("model.moe.shared_experts", moe.shared_experts);
    if (r.find("model.moe.shared_expert_ffn_hidden_size")) {
      positive("model.moe.shared_expert_ffn_hidden_size", moe.shared_expert_ffn_hidden_size);
      r.require(moe.shared_experts > 0, "model.moe.shared_expert_ffn_hidden_size",
                "only together with model.moe.shared_experts > 0", str(moe.shared_expert_ffn_hidden_size));
    }
    // Expert replication (docs/expert_replication.md); the rules that need expert_parallel are in
    // parallel/layout_check.cc, so that a layout given on the command line is checked the same way.
    non_negative("model.moe.redundant_experts", moe.redundant_experts);
    non_negative("model.moe.rebalance_interval", moe.rebalance_interval);
    if (moe.redundant_experts > 0)
      r.require(moe.rebalance_interval > 0, "model.moe.rebalance_interval",
                "a positive number of steps between replica placements when redundant_experts > 0",
                str(moe.rebalance_interval));
    else if (moe.rebalance_interval > 0)
      r.fail_at(r.line_of("model.moe.rebalance_interval"), "model.moe.rebalance_interval",
                "only applies with model.moe.redundant_experts > 0 (there are no replicas to place)");
    bool any_moe_layer = moe.first_dense_layers == 0;  // (layer_freq alone was never required to leave one)
    // The first layer >= first_dense_layers with l % layer_freq == layer_freq - 1, in O(1) (a loop over
    // 2^31 layers took seconds before any answer).
    if (moe.layer_freq >= 1 && moe.first_dense_layers >= 0) {
      const int64_t freq = moe.layer_freq, first = moe.first_dense_layers;
      any_moe_layer |= first + (freq - 1 - first % freq + freq) % freq < m.num_layers;
    }
    r.require(any_moe_layer, "model.moe.first_dense_layers",
              fmt::format("a value leaving at least one MoE layer after the first_dense_layers = {} of {} layers",
                          moe.first_dense_layers, m.num_layers),
              str(moe.layer_freq));
  } else {
    // MoE-only keys on a dense model would be silently meaningless.
    for (const char* key : {"model.moe.first_dense_layers", "model.moe.expert_ffn_hidden_size",
                            "model.moe.shared_experts", "model.moe.shared_expert_ffn_hidden_size",
                            "model.moe.score_function", "model.moe.normalize_top_k",
                            "model.moe.redundant_experts", "model.moe.rebalance_interval"})
      if (r.find(key))
        r.fail_at(r.line_of(key), key, "only applies to MoE models, expected model.moe.num_experts > 0 with it");
  }

  const ParallelConfig& p = c.parallel;
  positive("parallel_config.data_parallel", p.data_parallel);
  positive("parallel_config.expert_parallel", p.expert_parallel);
  positive("parallel_config.tensor_parallel", p.tensor_parallel);
  positive("parallel_config.pipeline_parallel", p.pipeline_parallel);
  positive("parallel_config.micro_batch_num", p.micro_batch_num);
  // Upper bounds any layout has (each TP rank holds whole heads, each stage a layer, each EP rank an
  // expert), checked here so that an absurd size is named with its line, not as a world-size mismatch.
  if (m.num_heads > 0)
    r.require(p.tensor_parallel <= m.num_heads, "parallel_config.tensor_parallel",
              fmt::format("an integer in [1, num_heads = {}] (each tensor-parallel rank holds whole heads)", m.num_heads),
              str(p.tensor_parallel));
  if (m.num_layers > 0)
    r.require(p.pipeline_parallel <= m.num_layers, "parallel_config.pipeline_parallel",
              fmt::format("an integer in [1, num_layers = {}] (each stage holds a layer)", m.num_layers),
              str(p.pipeline_parallel));
  if (m.moe.num_experts > 0)
    r.require(p.expert_parallel <= m.moe.num_experts, "parallel_config.expert_parallel",
              fmt::format("an integer in [1, num_experts = {}] (each expert-parallel rank holds an expert)",
                          m.moe.num_experts),
              str(p.expert_parallel));
  r.require(p.gradient_aggregation_group >= 0, "parallel_config.gradient_aggregation_group",
            "a positive bucket count (or 0: buckets by grad_bucket_size)", str(p.gradient_aggregation_group));
  r.require(p.grad_bucket_size >= 0, "parallel_config.grad_bucket_size",
            "a positive element count (or 0: the default)", str(p.grad_bucket_size));
  r.require(p.gradient_aggregation_group == 0 || p.grad_bucket_size == 0, "parallel_config.grad_bucket_size",
            "only one of grad_bucket_size, gradient_aggregation_group",
            fmt::format("{} with gradient_aggregation_group {}", p.grad_bucket_size, p.gradient_aggregation_group));
  non_negative("parallel_config.zero3_prefetch_buckets", p.zero3_prefetch_buckets);
  r.require(p.zero_stage >= 0 && p.zero_stage <= 3, "parallel_config.zero_stage", "one of 0, 1, 2, 3",
            str(p.zero_stage));
  positive("parallel_config.virtual_pipeline", p.virtual_pipeline);
  for (size_t i = 0; i < p.stage_layers.size(); ++i)
    positive(fmt::format("parallel_config.stage_layers[{}]", i), p.stage_layers[i]);
  r.require(is_rank_order(p.rank_order), "parallel_config.rank_order",
            "a permutation of tp, ep, dp, pp joined by '-' (e.g. tp-ep-dp-pp)", p.rank_order);
  std::map<int, size_t> seen_devices;
  for (size_t i = 0; i < p.device_list.size(); ++i) {
    const std::string path = fmt::format("parallel_config.device_list[{}]", i);
    non_negative(path, p.device_list[i]);
    auto [it, inserted] = seen_devices.emplace(p.device_list[i], i);
    if (!inserted)
      r.fail_at(r.line_of(path), path,
                fmt::format("rank {} is already listed at device_list[{}], expected distinct ranks", p.device_list[i],
                            it->second));
  }
  non_negative("parallel_config.local_worker_num", p.local_worker_num);
  r.require(p.collective_timeout > 0, "parallel_config.collective_timeout", "a positive number of seconds",
            str(p.collective_timeout));

  const TrainConfig& t = c.train;
  positive("train.global_batch_size", t.global_batch_size);
  positive("train.steps", t.steps);
  r.require(t.lr > 0, "train.lr", "a positive number", str(t.lr));
  r.require(t.min_lr >= 0, "train.min_lr", "a non-negative number", str(t.min_lr));
  if (t.min_lr > t.lr) {
    const std::string path = r.find("train.min_lr") || !r.find("train.lr") ? "train.min_lr" : "train.lr";
    r.fail_at(r.line_of(path), r.written(path),
              fmt::format("min_lr {} exceeds lr {}, expected 0 <= min_lr <= lr", t.min_lr, t.lr));
  }
  non_negative("train.warmup_steps", t.warmup_steps);
  r.require(t.weight_decay >= 0, "train.weight_decay", "a non-negative number", str(t.weight_decay));
  // AdamW's decoupled decay multiplies every weight by (1 - lr x weight_decay) each step: at 1 or
  // more it zeroes or flips them, and the run diverges (1.8e19 was found by fuzzing).
  if (t.lr > 0 && t.weight_decay * t.lr >= 1)
    r.require(false, "train.weight_decay",
              fmt::format("a number in [0, 1 / train.lr = {:g}) (each step multiplies the weights by 1 - lr x "
                          "weight_decay; typical values are 0.01 to 0.1)",
                          1 / t.lr),
              str(t.weight_decay));
  r.require(t.grad_clip >= 0, "train.grad_clip", "a non-negative number (0: no clipping)", str(t.grad_clip));
  r.require(t.beta1 >= 0 && t.beta1 < 1, "train.beta1", "a number in [0, 1)", str(t.beta1));
  r.require(t.beta2 >= 0 && t.beta2 < 1, "train.beta2", "a number in [0, 1)", str(t.beta2));
  r.require(t.eps > 0, "train.eps", "a positive number", str(t.eps));
  r.require(t.loss_scale.initial > 0, "train.loss_scale.initial", "a positive number", str(t.loss_scale.initial));
  r.require(t.loss_scale.factor > 1, "train.loss_scale.factor", "a number > 1", str(t.loss_scale.factor));
  positive("train.loss_scale.window", t.loss_scale.window);
  positive("train.loss_scale.hysteresis", t.loss_scale.hysteresis);
  positive("train.max_nonfinite_steps", t.max_nonfinite_steps);
  non_negative("train.freeze_steps", t.freeze_steps);
  positive("train.log_interval", t.log_interval);
  non_negative("train.eval_interval", t.eval_interval);
  positive("train.eval_batches", t.eval_batches);
  r.require(t.peak_tflops >= 0, "train.peak_tflops", "a non-negative number (TFLOP/s of one rank's device; 0: unknown)",
            str(t.peak_tflops));

  r.require(!c.data.train.empty(), "data.train", "the path of a token shard", c.data.train);
  auto known_format = [](const std::string& f) { return f == "moe4d" || f == "megatron"; };
  r.require(known_format(c.data.format), "data.format", "moe4d or megatron", c.data.format);
  for (size_t i = 0; i < c.data.train_sources.size(); ++i) {
    const DataSourceConfig& s = c.data.train_sources[i];
    const std::string at = fmt::format("data.train[{}]", i);
    if (r.find("data.train[0].path")) {  // the list form: each key has its own line
      r.require(!s.path.empty(), at + ".path", "the path of a token shard", s.path);
      r.require(s.format.empty() || known_format(s.format), at + ".format", "moe4d or megatron", s.format);
      r.require(s.weight > 0, at + ".weight", "a positive number", str(s.weight));
    } else {
      r.require(s.weight > 0, "data.train", "positive weights", str(s.weight));
    }
  }
  r.require(c.checkpoint.keep >= 1, "checkpoint.keep", "a positive integer", str(c.checkpoint.keep));
  non_negative("checkpoint.interval", c.checkpoint.interval);
  r.require(c.checkpoint.timeout > 0 && std::isfinite(c.checkpoint.timeout), "checkpoint.timeout",
            "a positive number of seconds", str(c.checkpoint.timeout));
  // Only a sharded save has per-rank files a background thread can write; a full save gathers.
  r.require(!c.checkpoint.async || c.checkpoint.format == CheckpointFormat::kSharded, "checkpoint.async",
            "false unless checkpoint.format is sharded (an asynchronous save writes per-rank shards)", "true");
}

}  // namespace moe4d::config_detail
