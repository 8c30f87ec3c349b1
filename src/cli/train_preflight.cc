// cli/train_preflight.cc — the checks `moe4d train` runs before allocating anything.
#include "cli/train_preflight.h"

#include <filesystem>

#include <fstream>
#include <sstream>

#include "config/size_limits.h"
#include "core/error.h"
#include "cli/train_setup.h"
#include "data/data_check.h"
#include "data/token_shard_format.h"
#include "parallel/layout_check.h"
#include "train/feature_gate.h"

namespace moe4d {

RankMemory this_machine_memory(int ranks_per_node, const std::string& meminfo) {
  std::ifstream in(meminfo);
  std::string line;
  double available = -1, total = -1;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    double kib = 0;
    if (!(fields >> key >> kib)) continue;
    if (key == "MemAvailable:") available = kib * 1024;
    if (key == "MemTotal:") total = kib * 1024;
  }
  if (available < 0 && total < 0) fail("cannot read the machine's memory from {} (no MemAvailable or MemTotal)", meminfo);
  const bool have_available = available >= 0;
  const double bytes = have_available ? available : total;
  const int ranks = ranks_per_node > 0 ? ranks_per_node : 1;
  return RankMemory{bytes / ranks, fmt::format("{} {:.1f} GiB / {} rank{} per node",
                                               have_available ? "MemAvailable" : "MemTotal",
                                               bytes / (1024.0 * 1024.0 * 1024.0), ranks, ranks == 1 ? "" : "s")};
}

TrainPreflight preflight_train(Config& config, int world_size, const RankMemory& memory) {
  check_size_limits(config);  // first: the layout checks below multiply these sizes in int
  // The layout messages name the keys; the file is added here.
  try {
    validate_layout(config.model, config.parallel, config.train.global_batch_size, world_size);
  } catch (const Error& e) {
    fail("{}: {}", config.source, e.what());
  }
  check_training_support(config);
  check_memory_fits(config, memory);
  resolve_data_paths(config);  // absolute paths; a missing file named with what it was resolved against
  // Every file of every source, and the tokenizer, must name one tokenizer: from the headers, before the
  // shards are read (a mismatch is named as such, not as a vocabulary or id error).
  std::vector<TokenSourceRef> sources;
  const auto& train = config.data.train_sources;
  for (size_t i = 0; i < train.size(); ++i)
    sources.push_back({train.size() == 1 ? "data.train" : fmt::format("data.train[{}]", i), train[i].path,
                       parse_token_format(train[i].format.empty() ? config.data.format : train[i].format, "data.format")});
  if (train.empty() && !config.data.train.empty())
    sources.push_back({"data.train", config.data.train, parse_token_format(config.data.format, "data.format")});
  if (!config.data.valid.empty())
    sources.push_back({"data.valid", config.data.valid, parse_token_format(config.data.format, "data.format")});
  TrainPreflight out;
  out.tokenizer = check_tokenizer_agreement(config.source, sources, config.data.tokenizer);
  // One moe4d shard per key is verified here with the tokenizer; blends, numbered shards and
  // Megatron datasets are verified source by source when the trainer opens them.
  auto single_shard = [&](const std::string& path, const std::string& format) {
    std::error_code ec;
    return format == "moe4d" && std::filesystem::exists(token_shard_paths(path).json, ec) ? path : std::string();
  };
  const bool one_source = config.data.train_sources.size() <= 1;
  const std::string train_format = !config.data.train_sources.empty() && !config.data.train_sources[0].format.empty()
                                       ? config.data.train_sources[0].format
                                       : config.data.format;
  check_training_data(TrainingDataSpec{.source = config.source,
                                       .train = one_source ? single_shard(config.data.train, train_format) : "",
                                       .valid = config.data.valid.empty() ? "" : single_shard(config.data.valid, config.data.format),
                                       .tokenizer = config.data.tokenizer,
                                       .model_vocab_size = config.model.vocab_size});
  out.memory = memory;
  return out;
}

}  // namespace moe4d
