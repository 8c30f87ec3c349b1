// cli/train_banner.cc — the start-of-run summary (see the header).
#include "cli/train_banner.h"

#include "core/error.h"
#include "core/log.h"
#include "data/token_source.h"
#include "plan/memory_fit.h"
#include "plan/param_count.h"
#include "train/metrics.h"

namespace moe4d {
namespace {

std::string bytes_text(double bytes) {
  if (bytes >= 1024.0 * 1024.0 * 1024.0) return fmt::format("{:.2f} GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024.0));
}

std::string source_line(const std::string& key, const std::string& path, const std::string& format_name,
                        int64_t id_limit) {
  std::string stats;
  try {
    const TokenSourceStats s = token_source_stats(path, parse_token_format(format_name, key), id_limit);
    stats = fmt::format("{} file{}, {} tokens, {} documents", s.files, s.files == 1 ? "" : "s",
                        format_count(double(s.tokens)), format_count(double(s.documents)));
  } catch (const Error& e) {
    stats = "size unknown";  // the trainer's open reports what is wrong with it
  }
  return fmt::format("{} {} ({} format, {})", key, path, format_name, stats);
}

}  // namespace

std::vector<std::string> train_start_lines(const Config& config, const TrainPreflight& preflight) {
  const ModelConfig& m = config.model;
  const ParallelConfig& p = config.parallel;
  std::vector<std::string> lines;

  const ModelParamCount params = count_model_params(m);
  std::string model = fmt::format("model:  {} layers, hidden {}, {} heads, ffn {}, vocab {}, seq {}", m.num_layers,
                                  m.hidden_size, m.num_heads, m.ffn_hidden_size, m.vocab_size, m.seq_length);
  if (m.is_moe())
    model += fmt::format("; MoE {} experts, top-{}: {} parameters, {} active per token", m.moe.num_experts,
                         m.moe.top_k, format_count(params.total()), format_count(params.active));
  else
    model += fmt::format(": {} parameters", format_count(params.total()));
  lines.push_back(model);

  const int64_t replicas = p.dense_replicas();  // the CP ranks of a replica share its sequences
  const int64_t micro = config.train.global_batch_size / (replicas * p.micro_batch_num);
  const std::string cp = p.context_parallel > 1 ? fmt::format(" / context_parallel {}", p.context_parallel) : "";
  lines.push_back(fmt::format(
      "batch:  micro-batch {} sequences = train.global_batch_size {} / (data_parallel {} x expert_parallel {}{} x "
      "micro_batch_num {}); {} tokens per step",
      micro, config.train.global_batch_size, p.data_parallel, p.expert_parallel, cp, p.micro_batch_num,
      format_count(double(config.train.global_batch_size) * m.seq_length)));

  const auto& sources = config.data.train_sources;
  for (size_t i = 0; i < sources.size(); ++i) {
    const std::string key = sources.size() == 1 ? "data.train" : fmt::format("data.train[{}] (weight {:g})", i, sources[i].weight);
    lines.push_back("data:   " + source_line(key, sources[i].path,
                                             sources[i].format.empty() ? config.data.format : sources[i].format,
                                             m.vocab_size));
  }
  if (sources.empty() && !config.data.train.empty())
    lines.push_back("data:   " + source_line("data.train", config.data.train, config.data.format, m.vocab_size));
  lines.push_back("data:   " + (config.data.valid.empty()
                                    ? std::string("data.valid not set: no validation loss")
                                    : source_line("data.valid", config.data.valid, config.data.format, m.vocab_size)));
  const TokenizerAgreement& t = preflight.tokenizer;
  lines.push_back(fmt::format("data:   tokenizer {}{}", t.spec.empty() ? std::string("(none named)") : t.spec,
                              t.identity ? " (" + t.identity->describe() + ")" : std::string()));

  const int world = p.world_size();
  lines.push_back(fmt::format(
      "layout: {} ranks = dp {} x ep {} x tp {} x pp {} (DP x EP x TP x PP, EP carved out of DP); in Megatron's "
      "terms: tensor-model-parallel {}, pipeline-model-parallel {}, expert-model-parallel {}, data-parallel {} "
      "(= {} / (TP x PP), EP inside it)",
      world, p.data_parallel, p.expert_parallel, p.tensor_parallel, p.pipeline_parallel, p.tensor_parallel,
      p.pipeline_parallel, p.expert_parallel, world / (p.tensor_parallel * p.pipeline_parallel), world));
  if (p.context_parallel > 1)
    lines.push_back(fmt::format(
        "layout: dense grid tp {} x cp {} x DP_dense {} per stage (each sequence split over {} ranks); in Megatron's "
        "terms context-parallel {}, data-parallel {} (= {} / (TP x CP x PP))",
        p.tensor_parallel, p.context_parallel, p.dense_replicas(), p.context_parallel, p.context_parallel,
        p.dense_replicas(), world));

  try {
    const MemoryBreakdown mem = config_memory_per_rank(config);
    lines.push_back(fmt::format(
        "memory: about {} per rank estimated by the planner's model (weights, gradients and optimizer {}, "
        "activations {}, buffers and reserve {}; docs/planner.md), of {} this machine offers ({})",
        bytes_text(mem.total()), bytes_text(mem.state()), bytes_text(mem.activations),
        bytes_text(mem.total() - mem.state() - mem.activations), bytes_text(preflight.memory.bytes),
        preflight.memory.description));
  } catch (const Error& e) {
    lines.push_back(fmt::format("memory: no estimate ({})", e.what()));
  }
  if (m.is_moe()) {
    int moe_layers = 0;
    for (int l = 0; l < m.num_layers; ++l) moe_layers += m.is_moe_layer(l) ? 1 : 0;
    lines.push_back(fmt::format(
        "aux:    `aux_sum` in the progress lines (moe.aux_loss in the metrics) is the load-balancing loss summed over "
        "the {} MoE layer{} (Megatron logs the mean: divide by {})",
        moe_layers, moe_layers == 1 ? "" : "s", moe_layers));
  }
  return lines;
}

void log_train_start(const Config& config, const TrainPreflight& preflight, bool quiet) {
  if (!quiet)
    for (const std::string& line : train_start_lines(config, preflight)) log_info("{}", line);
  if (!preflight.tokenizer.unrecorded.empty())
    log_warn("{}", unrecorded_tokenizer_warning(preflight.tokenizer.unrecorded));
}

}  // namespace moe4d
