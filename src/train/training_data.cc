// train/training_data.cc — config data sources -> blend and validation source.
#include "train/training_data.h"

#include "core/error.h"

namespace moe4d {
namespace {

std::unique_ptr<TokenSource> open_checked(const Config& config, const std::string& path, const std::string& format,
                                          const std::string& key) {
  std::unique_ptr<TokenSource> source =
      open_token_source(path, parse_token_format(format, config.source + ": " + key), config.model.vocab_size);
  if (source->vocab_size() > config.model.vocab_size)
    fail("{}: the token shard has vocab_size {}, larger than model.vocab_size {} ({})", config.source,
         source->vocab_size(), config.model.vocab_size, source->name());
  return source;
}

}  // namespace

std::unique_ptr<BlendedDataset> open_training_blend(const Config& config) {
  std::vector<DataSourceConfig> listed = config.data.train_sources;
  if (listed.empty()) listed.push_back({.path = config.data.train});  // a Config built in code
  std::vector<BlendSource> sources;
  for (size_t i = 0; i < listed.size(); ++i) {
    const DataSourceConfig& s = listed[i];
    const std::string format = s.format.empty() ? config.data.format : s.format;
    sources.push_back({.tokens = open_checked(config, s.path, format, fmt::format("data.train[{}]", i)),
                       .weight = s.weight,
                       .label = s.path});
  }
  return std::make_unique<BlendedDataset>(std::move(sources), config.train.global_batch_size,
                                          config.model.seq_length);
}

std::unique_ptr<TokenSource> open_validation_source(const Config& config) {
  if (config.data.valid.empty()) return nullptr;
  return open_checked(config, config.data.valid, config.data.format, "data.valid");
}

nlohmann::json blend_step_record(const BlendedDataset& blend, uint64_t seed, int64_t step, int seq_len) {
  const std::vector<int64_t> sequences = blend.sequences_per_source(seed, step);
  nlohmann::json tokens = nlohmann::json::object();
  for (int k = 0; k < blend.num_sources(); ++k)
    tokens[blend.source(k).label] = int64_t(tokens.value(blend.source(k).label, int64_t(0))) + sequences[k] * seq_len;
  return {{"tokens_per_source", tokens}};
}

}  // namespace moe4d
