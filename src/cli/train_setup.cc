// cli/train_setup.cc — paths, run directory and resume point of `moe4d train` (see the header).
#include "cli/train_setup.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "checkpoint/run_dir.h"
#include "core/error.h"
#include "core/log.h"
#include "data/megatron_indexed_dataset.h"
#include "data/token_shard_format.h"
#include "data/token_source.h"
#include "data/tokenizer_record.h"

namespace moe4d {
namespace fs = std::filesystem;

namespace {

void require_exists(const std::string& key, const std::string& given, const std::string& resolved,
                    const std::string& what, const Config& config) {
  std::error_code ec;
  if (fs::exists(resolved, ec)) return;
  const std::string against = fs::path(given).is_absolute()
                                  ? std::string("an absolute path")
                                  : fmt::format("relative, resolved against the working directory {}",
                                                fs::current_path().string());
  fail("{}: {} {} does not exist ({} '{}' in {} is {})", key, what, resolved, key, given, config.source, against);
}

}  // namespace

void resolve_data_paths(Config& config) {
  auto absolute = [](std::string& path) { path = fs::absolute(path).lexically_normal().string(); };
  // A token source exists when its files do in its format (data/token_source.h: one shard, or the
  // numbered shards <path>-00000... of `prepare --shard-size`); the first file looked for is named.
  auto require_source = [&](const std::string& key, const std::string& given, const std::string& path,
                            const std::string& format) {
    std::error_code ec;
    if (format == "megatron") {
      const std::string idx = megatron_prefix(path) + ".idx";
      require_exists(key, given, idx, "Megatron dataset index", config);
      require_exists(key, given, megatron_prefix(path) + ".bin", "Megatron dataset", config);
      return;
    }
    const TokenShardPaths shard = token_shard_paths(path);
    if (!fs::exists(shard.json, ec) && fs::exists(token_shard_paths(numbered_shard_stem(path, 0)).json, ec)) return;
    require_exists(key, given, shard.json, "token shard header", config);
    require_exists(key, given, shard.bin, "token shard", config);
  };
  for (size_t i = 0; i < config.data.train_sources.size(); ++i) {
    DataSourceConfig& source = config.data.train_sources[i];
    const std::string given = source.path;
    absolute(source.path);
    const std::string key = config.data.train_sources.size() == 1 ? "data.train" : fmt::format("data.train[{}]", i);
    require_source(key, given, source.path, source.format.empty() ? config.data.format : source.format);
  }
  if (!config.data.train.empty()) {
    const std::string given = config.data.train;
    absolute(config.data.train);
    if (config.data.train_sources.empty()) require_source("data.train", given, config.data.train, config.data.format);
  }
  if (!config.data.valid.empty()) {
    const std::string given = config.data.valid;
    absolute(config.data.valid);
    require_source("data.valid", given, config.data.valid, config.data.format);
  }
  if (!config.data.tokenizer.empty() && config.data.tokenizer != "bytes") {
    const std::string given = config.data.tokenizer;
    absolute(config.data.tokenizer);
    require_exists("data.tokenizer", given, config.data.tokenizer, "tokenizer model", config);
  }
}

std::string metrics_path_of(const Config& config, const std::string& metrics_flag) {
  if (!metrics_flag.empty()) return metrics_flag;
  return config.metrics_path();
}

RunStart prepare_run_dir(const Config& config, const std::string& metrics_path, const RunDirRequest& request) {
  const std::string& dir = config.checkpoint.dir;
  const bool resume = request.resume || request.resume_strict, resume_from_given = !request.resume_from.empty();
  const bool start_over = request.start_over;
  const char* resume_flag = request.resume_strict ? "--resume-strict" : "--resume";
  auto check_run_tokenizer = [&](const std::string& checkpoint) {
    if (!request.tokenizer || !request.tokenizer->identity) return;
    check_checkpoint_tokenizer(
        checkpoint, *request.tokenizer->identity,
        fmt::format("this run's tokenizer {} (data.tokenizer, or the one its data names) is", request.tokenizer->spec));
  };
  RunStart start;
  if (resume && dir.empty()) fail("{} needs checkpoint.dir in {}", resume_flag, config.source);
  if (!resume && !resume_from_given) {
    const RunDirContents contents = inspect_run_dir(dir, metrics_path);
    if (contents.used() && !start_over) fail("{}", used_run_dir_message(dir, contents, metrics_path));
    if (contents.used()) {
      const std::string moved = move_run_aside(dir, metrics_path);
      log_info("--start-over: the previous run ({}) was moved to {}", contents.describe(metrics_path), moved);
    }
  }
  std::error_code missing;
  if (request.resume_strict && !resume_from_given && !fs::exists(dir, missing))  // before it is created below
    fail("--resume-strict: no checkpoint in {} (checkpoint.dir '{}' in {} does not exist); expected a step_* "
         "directory from an earlier run (drop --resume-strict to start from step 0)",
         fs::absolute(dir).lexically_normal().string(), dir, config.source);
  if (!dir.empty()) require_writable_dir(dir, "checkpoint.dir");
  std::error_code ec;
  if (fs::exists(metrics_path, ec)) {
    // An existing file (or device) is probed as it will be used: opened for appending.
    const int fd = ::open(metrics_path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) fail("metrics file {} is not writable: {}", metrics_path, std::strerror(errno));
    ::close(fd);
  } else {
    const std::string metrics_dir = fs::path(metrics_path).parent_path().string();
    require_writable_dir(metrics_dir.empty() ? "." : metrics_dir, "the metrics file's directory");
  }
  if (resume && !resume_from_given) {
    const ResumePoint point = find_resume_point(dir);
    if (!point.notice.empty()) log_warn("{}", point.notice);
    const std::string searched = fs::absolute(dir).lexically_normal().string();
    if (point.path.empty()) {
      if (request.resume_strict)
        fail("--resume-strict: no checkpoint in {} (checkpoint.dir '{}' in {}); expected a step_* directory from an "
             "earlier run (drop --resume-strict to start from step 0)",
             searched, dir, config.source);
      // Loud on purpose: a mistyped checkpoint.dir would otherwise retrain from scratch unnoticed.
      log_warn("--resume: no checkpoint in {} (checkpoint.dir '{}' in {}), so training STARTS FROM STEP 0; if a "
               "run should be there, stop and fix checkpoint.dir (--resume-strict refuses instead)",
               searched, dir, config.source);
    } else {
      start.resume_step = point.step;
      check_run_tokenizer(point.path);
    }
  }
  if (resume_from_given) check_run_tokenizer(request.resume_from);
  return start;
}

void check_checkpoint_tokenizer(const std::string& path, const TokenizerIdentity& expected,
                                const std::string& expected_says) {
  std::error_code ec;
  std::string step_dir = path;
  if (!fs::exists(fs::path(step_dir) / "state.json", ec) && fs::exists(fs::path(path) / "latest", ec)) {
    std::ifstream latest(fs::path(path) / "latest");
    std::string name;
    std::getline(latest, name);
    step_dir = (fs::path(path) / name).string();
  }
  const fs::path state_path = fs::path(step_dir) / "state.json";
  if (!fs::exists(state_path, ec)) return;  // not a checkpoint: the loader says so
  nlohmann::json state;
  try {
    std::ifstream in(state_path);
    state = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception&) {
    return;  // a damaged state.json fails its checksum in the loader, with the better message
  }
  if (!state.contains("tokenizer") || !state["tokenizer"].is_object()) return;
  const nlohmann::json& recorded = state["tokenizer"];
  const std::string spec = recorded.value("spec", "");
  TokenizerIdentity identity;
  if (spec == "bytes") {
    identity = tokenizer_identity_of("bytes");
  } else if (recorded.contains("sha256") && recorded["sha256"].is_string()) {
    const fs::path model = fs::path(step_dir) / recorded.value("file", kCheckpointTokenizerFile);
    try {
      // The kind and vocabulary from the copy (a sentencepiece model or a tokenizer.json), the hash as recorded.
      identity = tokenizer_identity_of(model.string());
      identity.sha256 = recorded["sha256"].get<std::string>();
    } catch (const Error&) {
      return;  // a missing or damaged copy fails the manifest check in the loader
    }
  } else {
    return;  // trained without a named tokenizer (e.g. Megatron data and no data.tokenizer)
  }
  check_tokenizers_agree({{expected_says, expected}, {fmt::format("checkpoint {} was trained with", step_dir), identity}});
}

}  // namespace moe4d
