// config/config_validate.cc — pass 2 of the config loader: ranges and cross-field rules on the typed
// Config, quoting each value as the user wrote it (the lines come from pass 1's ConfigReader).
#include <cmath>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <variant>

#include "config/config_keys.h"
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

// What a range check expects (ConfigKey::expected, or "a positive integer" and the like).
std::string expected_of(const ConfigKey& key, bool integer) {
  if (!key.expected.empty()) return std::string(key.expected);
  return fmt::format("a {} {}", key.range.lo_open ? "positive" : "non-negative", integer ? "integer" : "number");
}

// Each key's own range (ConfigKey::range), in table order; a list's elements one by one.
void check_ranges(const Config& c, const ConfigReader& r) {
  Config& fields = const_cast<Config&>(c);  // only read: key.field takes a mutable Config
  for (const ConfigKey& key : config_keys()) {
    if (!key.field || !key.range.bounded()) continue;
    if ((key.flags & kKeyMoeRange) && !c.model.is_moe()) continue;
    const std::string path(key.path);
    if ((key.flags & kKeyIfGiven) && !r.find(path)) continue;
    std::visit(
        [&](auto* value) {
          using T = std::remove_pointer_t<decltype(value)>;
          if constexpr (std::is_same_v<T, std::vector<int>>) {
            for (size_t i = 0; i < value->size(); ++i)
              r.require(key.range.contains((*value)[i]), fmt::format("{}[{}]", path, i), expected_of(key, true),
                        fmt::format("{}", (*value)[i]));
          } else if constexpr (std::is_same_v<T, std::optional<double>>) {
            if (*value) r.require(key.range.contains(**value), path, expected_of(key, false), fmt::format("{}", **value));
          } else if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
            r.require(key.range.contains(static_cast<double>(*value)), path, expected_of(key, std::is_integral_v<T>),
                      fmt::format("{}", *value));
          }
        },
        key.field(fields));
  }
}

// Group-limited routing (kernels/router.h): groups of >= 2 experts (a group's score is its two best),
// group_topk of them, enough experts in them for top_k.
void validate_group_routing(const MoeConfig& moe, const ConfigReader& r, const std::string& groups_key,
                            const std::string& topk_key) {
  if (moe.num_groups <= 0 || moe.group_topk <= 0) return;  // check_ranges named it
  if (moe.num_groups == 1) {
    if (moe.group_topk != 1)
      r.fail_at(r.line_of(topk_key), topk_key, "only applies with model.moe.num_groups > 1, expected 1 without it");
    return;
  }
  r.require(moe.num_experts % moe.num_groups == 0 && moe.num_experts / moe.num_groups >= 2, groups_key,
            fmt::format("a divisor of num_experts = {} leaving at least 2 experts per group", moe.num_experts),
            fmt::format("{}", moe.num_groups));
  r.require(moe.group_topk <= moe.num_groups &&
                int64_t{moe.group_topk} * (moe.num_experts / moe.num_groups) >= moe.top_k,
            topk_key,
            fmt::format("an integer in [1, num_groups = {}] whose groups hold at least top_k = {} experts",
                        moe.num_groups, moe.top_k),
            fmt::format("{}", moe.group_topk));
}

// Multi-head latent attention (model.kv_lora_rank and its widths) and YaRN RoPE scaling.
void validate_mla(const Config& c, const ConfigReader& r) {
  const auto key = [&](const auto& field) { return std::string(config_key_path(c, &field)); };
  const ModelConfig& m = c.model;
  const MlaConfig& mla = m.mla;
  const int* widths[] = {&mla.q_lora_rank, &mla.qk_nope_head_dim, &mla.qk_rope_head_dim, &mla.v_head_dim};
  if (!m.is_mla()) {
    for (const int* w : widths)
      if (r.find(key(*w)))
        r.fail_at(r.line_of(key(*w)), key(*w), "only applies with model.kv_lora_rank (multi-head latent attention)");
  } else {
    for (const int* w : {&mla.qk_nope_head_dim, &mla.qk_rope_head_dim, &mla.v_head_dim})
      r.require(r.find(key(*w)) != nullptr, key(*w), "a positive integer with model.kv_lora_rank (MLA)", "missing");
    r.require(mla.qk_rope_head_dim % 2 == 0, key(mla.qk_rope_head_dim), "an even integer (RoPE rotates pairs)",
              fmt::format("{}", mla.qk_rope_head_dim));
    if (r.find(key(m.num_kv_heads)) && m.num_kv_heads != m.num_heads)
      r.fail_at(r.line_of(key(m.num_kv_heads)), key(m.num_kv_heads),
                fmt::format("{} differs from num_heads {}: with model.kv_lora_rank (MLA) every head has its own key "
                            "and value, expanded from one shared latent",
                            m.num_kv_heads, m.num_heads));
    // MLA has its own head widths and latent norms: the standard attention's options do not apply.
    if (r.find(key(m.head_size)))
      r.fail_at(r.line_of(key(m.head_size)), key(m.head_size),
                "does not apply with model.kv_lora_rank (MLA sets its head widths with qk_nope_head_dim, "
                "qk_rope_head_dim and v_head_dim)");
    if (m.qk_norm)
      r.fail_at(r.line_of(key(m.qk_norm)), key(m.qk_norm),
                "does not apply with model.kv_lora_rank (MLA normalises its latents, not its q/k heads)");
  }
  const RopeScaling& rs = m.rope_scaling;
  const double* rs_numbers[] = {&rs.beta_fast, &rs.beta_slow, &rs.mscale, &rs.mscale_all_dim};
  if (!rs.enabled()) {
    for (const double* v : rs_numbers)
      if (r.find(key(*v)))
        r.fail_at(r.line_of(key(*v)), key(*v), "only applies with model.rope_scaling.factor (YaRN)");
    if (r.find(key(rs.original_max_position_embeddings)))
      r.fail_at(r.line_of(key(rs.original_max_position_embeddings)), key(rs.original_max_position_embeddings),
                "only applies with model.rope_scaling.factor (YaRN)");
  } else {
    r.require(rs.factor >= 1, key(rs.factor), "a number >= 1 (YaRN extends the context)", fmt::format("{}", rs.factor));
    r.require(rs.original_max_position_embeddings > 0, key(rs.original_max_position_embeddings),
              "a positive integer with model.rope_scaling.factor (YaRN)", "missing");
  }
}

}  // namespace

// Pass 2: ranges and cross-field rules of one model (no parallel layout arithmetic here).
void validate(const Config& c, const ConfigReader& r) {
  check_ranges(c, r);
  const auto str = [](auto v) { return fmt::format("{}", v); };
  const auto key = [&](const auto& field) { return std::string(config_key_path(c, &field)); };  // its path

  const ModelConfig& m = c.model;
  if (m.head_size > 0) {
    r.require(m.head_size % 2 == 0, key(m.head_size), "an even head dimension (RoPE rotates pairs)",
              str(m.head_size));
  } else if (m.hidden_size % m.num_heads != 0) {
    r.fail_at(r.line_of(key(m.num_heads)), key(m.num_heads),
              fmt::format("{} does not divide hidden_size {}", m.num_heads, m.hidden_size));
  } else if (m.head_dim() % 2 != 0)
    r.fail_at(r.line_of(key(m.num_heads)), key(m.num_heads),
              fmt::format("head dimension hidden_size / num_heads = {} / {} = {} is odd, expected an even head "
                          "dimension (RoPE rotates pairs)",
                          m.hidden_size, m.num_heads, m.head_dim()));
  if (r.find(key(m.num_kv_heads))) {
    if (m.num_heads % m.num_kv_heads != 0)
      r.fail_at(r.line_of(key(m.num_kv_heads)), key(m.num_kv_heads),
                fmt::format("{} does not divide num_heads {}, expected a divisor (each KV head serves num_heads / "
                            "num_kv_heads query heads)",
                            m.num_kv_heads, m.num_heads));
  }
  validate_mla(c, r);
  const MoeConfig& moe = m.moe;
  if (moe.num_experts > 0) {
    r.require(moe.top_k >= 1 && moe.top_k <= moe.num_experts, key(moe.top_k),
              fmt::format("an integer in [1, num_experts = {}]", moe.num_experts), str(moe.top_k));
    r.require(moe.first_dense_layers >= 0 && moe.first_dense_layers < m.num_layers, key(moe.first_dense_layers),
              fmt::format("an integer in [0, num_layers = {}) (at least one layer must stay MoE)", m.num_layers),
              str(moe.first_dense_layers));
    if (r.find(key(moe.shared_expert_ffn_hidden_size))) {
      r.require(moe.shared_experts > 0, key(moe.shared_expert_ffn_hidden_size),
                "only together with model.moe.shared_experts > 0", str(moe.shared_expert_ffn_hidden_size));
    }
    // Expert replication (docs/expert_replication.md); the rules that need expert_parallel are in
    // parallel/layout_check.cc, so that a layout given on the command line is checked the same way.
    if (moe.redundant_experts > 0)
      r.require(moe.rebalance_interval > 0, key(moe.rebalance_interval),
                "a positive number of steps between replica placements when redundant_experts > 0",
                str(moe.rebalance_interval));
    else if (moe.rebalance_interval > 0)
      r.fail_at(r.line_of(key(moe.rebalance_interval)), key(moe.rebalance_interval),
                "only applies with model.moe.redundant_experts > 0 (there are no replicas to place)");
    validate_group_routing(moe, r, key(moe.num_groups), key(moe.group_topk));
    bool any_moe_layer = moe.first_dense_layers == 0;  // (layer_freq alone was never required to leave one)
    // The first layer >= first_dense_layers with l % layer_freq == layer_freq - 1, in O(1) (a loop over
    // 2^31 layers took seconds before any answer).
    if (moe.layer_freq >= 1 && moe.first_dense_layers >= 0) {
      const int64_t freq = moe.layer_freq, first = moe.first_dense_layers;
      any_moe_layer |= first + (freq - 1 - first % freq + freq) % freq < m.num_layers;
    }
    for (size_t i = 0; i < moe.dense_layers.size(); ++i)
      r.require(moe.dense_layers[i] < m.num_layers, fmt::format("{}[{}]", key(moe.dense_layers), i),
                fmt::format("a layer index in [0, num_layers = {})", m.num_layers), str(moe.dense_layers[i]));
    r.require(any_moe_layer, key(moe.first_dense_layers),
              fmt::format("a value leaving at least one MoE layer after the first_dense_layers = {} of {} layers",
                          moe.first_dense_layers, m.num_layers),
              str(moe.layer_freq));
    // model.moe.dense_layers may remove the MoE layers layer_freq and first_dense_layers leave: look at
    // those in order until one is not listed (at most dense_layers.size() + 1 of them).
    if (any_moe_layer && !moe.dense_layers.empty()) {
      bool left = false;
      const int64_t freq = moe.layer_freq, first = moe.first_dense_layers;
      for (int64_t l = first + (freq - 1 - first % freq + freq) % freq; l < m.num_layers && !left; l += freq)
        left = m.is_moe_layer(int(l));
      if (!left)
        r.fail_at(r.line_of(key(moe.dense_layers)), key(moe.dense_layers),
                  "lists every MoE layer, expected at least one layer to stay MoE");
    }
  } else {
    // MoE-only keys on a dense model would be silently meaningless.
    for (const ConfigKey& key : config_keys()) {
      const std::string path(key.path);
      if ((key.flags & kKeyMoeOnly) && r.find(path))
        r.fail_at(r.line_of(path), path, "only applies to MoE models, expected model.moe.num_experts > 0 with it");
    }
  }

  const ParallelConfig& p = c.parallel;
  // Upper bounds any layout has (each TP rank holds whole heads, each stage a layer, each EP rank an
  // expert), checked here so that an absurd size is named with its line, not as a world-size mismatch.
  if (m.num_heads > 0)
    r.require(p.tensor_parallel <= m.num_heads, key(p.tensor_parallel),
              fmt::format("an integer in [1, num_heads = {}] (each tensor-parallel rank holds whole heads)", m.num_heads),
              str(p.tensor_parallel));
  if (m.num_layers > 0)
    r.require(p.pipeline_parallel <= m.num_layers, key(p.pipeline_parallel),
              fmt::format("an integer in [1, num_layers = {}] (each stage holds a layer)", m.num_layers),
              str(p.pipeline_parallel));
  if (m.moe.num_experts > 0)
    r.require(p.expert_parallel <= m.moe.num_experts, key(p.expert_parallel),
              fmt::format("an integer in [1, num_experts = {}] (each expert-parallel rank holds an expert)",
                          m.moe.num_experts),
              str(p.expert_parallel));
  r.require(p.gradient_aggregation_group == 0 || p.grad_bucket_size == 0, key(p.grad_bucket_size),
            "only one of grad_bucket_size, gradient_aggregation_group",
            fmt::format("{} with gradient_aggregation_group {}", p.grad_bucket_size, p.gradient_aggregation_group));
  r.require(is_rank_order(p.rank_order), key(p.rank_order),
            "a permutation of tp, ep, dp, pp joined by '-' (e.g. tp-ep-dp-pp)", p.rank_order);
  std::map<int, size_t> seen_devices;
  for (size_t i = 0; i < p.device_list.size(); ++i) {
    const std::string path = fmt::format("{}[{}]", key(p.device_list), i);
    auto [it, inserted] = seen_devices.emplace(p.device_list[i], i);
    if (!inserted)
      r.fail_at(r.line_of(path), path,
                fmt::format("rank {} is already listed at device_list[{}], expected distinct ranks", p.device_list[i],
                            it->second));
  }

  const TrainConfig& t = c.train;
  if (t.min_lr > t.lr) {
    const std::string path = r.find(key(t.min_lr)) || !r.find(key(t.lr)) ? key(t.min_lr) : key(t.lr);
    r.fail_at(r.line_of(path), r.written(path),
              fmt::format("min_lr {} exceeds lr {}, expected 0 <= min_lr <= lr", t.min_lr, t.lr));
  }
  // AdamW's decoupled decay multiplies every weight by (1 - lr x weight_decay) each step: at 1 or
  // more it zeroes or flips them, and the run diverges (1.8e19 was found by fuzzing).
  if (t.lr > 0 && t.weight_decay * t.lr >= 1)
    r.require(false, key(t.weight_decay),
              fmt::format("a number in [0, 1 / train.lr = {:g}) (each step multiplies the weights by 1 - lr x "
                          "weight_decay; typical values are 0.01 to 0.1)",
                          1 / t.lr),
              str(t.weight_decay));

  const std::string train = key(c.data.train);
  r.require(!c.data.train.empty(), train, "the path of a token shard", c.data.train);
  auto known_format = [](const std::string& f) { return f == "moe4d" || f == "megatron"; };
  r.require(known_format(c.data.format), key(c.data.format), "moe4d or megatron", c.data.format);
  for (size_t i = 0; i < c.data.train_sources.size(); ++i) {
    const DataSourceConfig& s = c.data.train_sources[i];
    const std::string at = fmt::format("{}[{}]", train, i);
    if (r.find(train + "[0].path")) {  // the list form: each key has its own line
      r.require(!s.path.empty(), at + ".path", "the path of a token shard", s.path);
      r.require(s.format.empty() || known_format(s.format), at + ".format", "moe4d or megatron", s.format);
      r.require(s.weight > 0, at + ".weight", "a positive number", str(s.weight));
    } else {
      r.require(s.weight > 0, train, "positive weights", str(s.weight));
    }
  }
  // Only a sharded save has per-rank files a background thread can write; a full save gathers.
  r.require(!c.checkpoint.async || c.checkpoint.format == CheckpointFormat::kSharded, key(c.checkpoint.async),
            "false unless checkpoint.format is sharded (an asynchronous save writes per-rank shards)", "true");
}

}  // namespace moe4d::config_detail
