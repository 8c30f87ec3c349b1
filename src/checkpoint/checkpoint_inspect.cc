// checkpoint/checkpoint_inspect.cc — the reports of `moe4d ckpt inspect | verify | list`.
#include "checkpoint/checkpoint_inspect.h"

#include <sys/stat.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/sharded_index.h"
#include "core/error.h"
#include "core/sha256.h"

namespace moe4d {
namespace fs = std::filesystem;

namespace {

constexpr const char* kManifest = "MANIFEST.json";

std::string trimmed(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read {}", path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string utc_time(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return "?";
  std::tm tm{};
  gmtime_r(&st.st_mtime, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%SZ", &tm);
  return text;
}

// The step directory `latest` names under `root`, or "" if there is no readable `latest`.
std::string latest_name(const std::string& root) {
  std::error_code ec;
  if (!fs::is_regular_file(root + "/latest", ec)) return "";
  std::string name = read_text(root + "/latest");
  name.erase(name.find_last_not_of(" \t\r\n") + 1);
  return name;
}

bool is_expert_tensor(const std::string& name) { return name.find(".moe.experts.") != std::string::npos; }

// Built by appending (inserting into the string trips GCC 12's -Wrestrict false positive).
std::string with_commas(int64_t value) {
  const std::string digits = std::to_string(value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && digits[i - 1] != '-' && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

struct TableRow {
  std::string name, dtype, shape;
  int64_t elements = 0;
  uint64_t bytes = 0;
  size_t pieces = 1;
};

// One line per tensor (name, dtype, shape, bytes, group[, pieces]), then totals per parameter group.
void tensor_table(const std::vector<TableRow>& rows, bool with_pieces,
                  const std::function<void(const std::string&)>& line) {
  size_t width = 4;
  for (const TableRow& row : rows) width = std::max(width, row.name.size());
  line(fmt::format("  {:<{}}  {:<5}  {:<20}  {:>12}  {:<6}{}", "name", width, "dtype", "shape", "bytes", "group",
                   with_pieces ? "  pieces" : ""));
  struct Totals {
    int tensors = 0;
    int64_t elements = 0;
    uint64_t bytes = 0;
  };
  std::map<std::string, Totals> groups;
  for (const TableRow& row : rows) {
    const std::string group = is_expert_tensor(row.name) ? "expert" : "dense";
    std::string text = fmt::format("  {:<{}}  {:<5}  {:<20}  {:>12}  {}", row.name, width, row.dtype, row.shape,
                                   with_commas(static_cast<int64_t>(row.bytes)), group);
    if (with_pieces) text += fmt::format("{:>{}}", row.pieces, group == "dense" ? 9 : 8);
    line(text);
    for (const std::string& key : {group, std::string("total")}) {
      Totals& t = groups[key];
      t.tensors += 1;
      t.elements += row.elements;
      t.bytes += row.bytes;
    }
  }
  for (const std::string key : {"dense", "expert", "total"}) {
    if (!groups.count(key)) continue;
    const Totals& t = groups[key];
    line(fmt::format("  {:<6} {:>4} tensors  {:>14} elements  {}", key, t.tensors, with_commas(t.elements),
                     format_bytes(t.bytes)));
  }
}

}  // namespace

std::string format_bytes(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 30)) return fmt::format("{:.2f} GiB", double(bytes) / double(uint64_t{1} << 30));
  if (bytes >= (uint64_t{1} << 20)) return fmt::format("{:.2f} MiB", double(bytes) / double(uint64_t{1} << 20));
  if (bytes >= (uint64_t{1} << 10)) return fmt::format("{:.1f} KiB", double(bytes) / 1024.0);
  return fmt::format("{} B", bytes);
}

std::string resolve_checkpoint_dir(const std::string& path_in) {
  const std::string path = trimmed(path_in);
  std::error_code ec;
  if (fs::exists(path + "/" + kManifest, ec)) return path;
  const std::string latest = latest_name(path);
  if (!latest.empty()) return path + "/" + latest;
  if (!fs::is_directory(path, ec)) fail("no checkpoint at {}: no such directory", path);
  fail("{} is not a checkpoint, expected a step directory with {} or a checkpoint root with a 'latest' file", path,
       kManifest);
}

bool CheckpointCheck::ok() const {
  return problem.empty() &&
         std::all_of(files.begin(), files.end(), [](const FileCheck& f) { return f.problem.empty(); });
}

CheckpointCheck verify_checkpoint(const std::string& step_dir) {
  CheckpointCheck check;
  check.dir = trimmed(step_dir);
  std::error_code ec;
  const std::string manifest_path = check.dir + "/" + kManifest;
  if (!fs::is_directory(check.dir, ec)) {
    check.problem = "the directory is missing";
    return check;
  }
  if (!fs::is_regular_file(manifest_path, ec)) {
    check.problem = fmt::format("{} is missing (the write did not complete)", manifest_path);
    return check;
  }
  nlohmann::json manifest = nlohmann::json::parse(read_text(manifest_path), nullptr, false);
  if (manifest.is_discarded() || !manifest.is_object()) {
    check.problem = fmt::format("{} is not valid JSON", manifest_path);
    return check;
  }
  if (manifest.value("format", "") != "moe4d-checkpoint" || !manifest["version"].is_number_integer() ||
      manifest["version"].get<int>() != 1 || !manifest["step"].is_number_integer() || !manifest["files"].is_object()) {
    check.problem = fmt::format("{} is not a moe4d-checkpoint version 1 manifest with a step and files", manifest_path);
    return check;
  }
  check.step = manifest["step"].get<int64_t>();
  if (check.dir.size() >= 13 && fs::path(check.dir).filename().string() != checkpoint_dir_name(check.step) &&
      fs::path(check.dir).filename().string().rfind("step_", 0) == 0)
    check.problem = fmt::format("{} says step {}, but the directory is {}", manifest_path, check.step,
                                fs::path(check.dir).filename().string());
  for (const auto& [name, info] : manifest["files"].items()) {
    FileCheck file;
    file.path = check.dir + "/" + name;
    if (name.empty() || name.find('/') != std::string::npos || name[0] == '.' || !info.is_object() ||
        !info["bytes"].is_number_unsigned() || !info["sha256"].is_string()) {
      file.problem = fmt::format("its {} entry is malformed", kManifest);
      check.files.push_back(file);
      continue;
    }
    const uint64_t expected_bytes = info["bytes"].get<uint64_t>();
    const std::string expected_sha = info["sha256"].get<std::string>();
    if (!fs::is_regular_file(file.path, ec)) {
      file.problem = "missing";
      check.files.push_back(file);
      continue;
    }
    file.bytes = fs::file_size(file.path, ec);
    try {
      file.sha256 = sha256_file(file.path);
    } catch (const Error& e) {
      file.problem = e.what();
    }
    if (!file.problem.empty()) {
      // unreadable: reported as it is
    } else if (file.bytes != expected_bytes) {
      file.problem = fmt::format("{} bytes, the manifest says {}", file.bytes, expected_bytes);
    } else if (file.sha256 != expected_sha) {
      file.problem = fmt::format("sha256 mismatch (manifest {}, file {})", expected_sha, file.sha256);
    } else if (name.ends_with(".safetensors")) {
      try {
        SafetensorsFile::open(file.path);
      } catch (const Error& e) {
        file.problem = e.what();
      }
    } else if (name.ends_with(".json")) {
      if (nlohmann::json::parse(read_text(file.path), nullptr, false).is_discarded()) file.problem = "not valid JSON";
    }
    check.files.push_back(std::move(file));
  }
  // A sharded checkpoint: the index must describe the pieces its files hold.
  if (check.ok() && manifest["files"].contains(kShardedIndexFile)) check.problem = sharded_index_problem(check.dir);
  return check;
}

void verify_checkpoints(const std::string& path_in, const std::function<void(const std::string&)>& on_line) {
  const std::string path = trimmed(path_in);
  std::error_code ec;
  std::vector<std::string> dirs;
  std::string latest_problem;
  if (fs::exists(path + "/" + kManifest, ec) || fs::path(path).filename().string().rfind("step_", 0) == 0) {
    dirs.push_back(path);
  } else {
    if (!fs::is_directory(path, ec)) fail("no checkpoint at {}: no such directory", path);
    for (const CheckpointEntry& entry : list_checkpoints(path)) dirs.push_back(entry.path);
    const std::string latest = latest_name(path);
    if (latest.empty() && dirs.empty())
      fail("{} is not a checkpoint, expected a step directory with {} or a checkpoint root with a 'latest' file", path,
           kManifest);
    if (latest.empty())
      latest_problem = fmt::format("{}/latest is missing", path);
    else if (std::find(dirs.begin(), dirs.end(), path + "/" + latest) == dirs.end())
      latest_problem = fmt::format("{}/latest names '{}', which is not a complete checkpoint", path,
                                   escaped_text(latest));
    else
      on_line(fmt::format("ok    {}/latest -> {}", path, latest));
  }
  std::string first_failure;
  int failures = 0;
  auto failed = [&](const std::string& line) {
    on_line("FAIL  " + line);
    if (failures++ == 0) first_failure = line;
  };
  if (!latest_problem.empty()) failed(latest_problem);
  for (const std::string& dir : dirs) {
    const CheckpointCheck check = verify_checkpoint(dir);
    if (!check.problem.empty()) failed(fmt::format("{}: {}", check.dir, check.problem));
    for (const FileCheck& file : check.files) {
      if (file.problem.empty())
        on_line(fmt::format("ok    {}  {}  sha256 {}", file.path, format_bytes(file.bytes), file.sha256));
      else
        failed(fmt::format("{}: {}", file.path, file.problem));
    }
  }
  if (failures > 0)
    fail("checkpoint verification failed: {}{}", first_failure,
         failures > 1 ? fmt::format(" (and {} more)", failures - 1) : "");
}

std::vector<ListedCheckpoint> list_run_checkpoints(const std::string& root_in) {
  const std::string root = trimmed(root_in);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) fail("no checkpoint directory at {}: no such directory", root);
  const std::string latest = latest_name(root);
  std::vector<ListedCheckpoint> out;
  for (const CheckpointEntry& entry : list_checkpoints(root)) {
    ListedCheckpoint item;
    item.name = fs::path(entry.path).filename().string();
    item.step = entry.step;
    item.time = utc_time(entry.path + "/" + kManifest);
    for (const auto& file : fs::directory_iterator(entry.path, ec)) {
      std::error_code size_ec;
      if (file.is_regular_file(size_ec)) item.bytes += file.file_size(size_ec);
    }
    item.latest = item.name == latest;
    out.push_back(std::move(item));
  }
  if (out.empty() && latest.empty())
    fail("{} holds no checkpoints (expected step_<N> directories with a {} and a 'latest' file)", root, kManifest);
  std::reverse(out.begin(), out.end());
  return out;
}

std::string inspect_checkpoint(const std::string& path) {
  const Checkpoint checkpoint = Checkpoint::open(path);
  std::string out;
  auto line = [&out](const std::string& text) { out += text + "\n"; };
  uint64_t total_bytes = 0;
  for (const std::string& name : checkpoint.files()) total_bytes += fs::file_size(checkpoint.file_path(name));
  line(fmt::format("checkpoint {}", checkpoint.path()));
  line(fmt::format("  step        {}", checkpoint.step()));
  line(fmt::format("  written     {}", utc_time(checkpoint.path() + "/" + kManifest)));
  // The rank files of a sharded checkpoint as one range.
  std::vector<std::string> files, rank_files;
  for (const std::string& name : checkpoint.files())
    (name.rfind("rank_", 0) == 0 && name.ends_with(".safetensors") ? rank_files : files).push_back(name);
  if (rank_files.size() == 1) files.push_back(rank_files.front());
  if (rank_files.size() > 1)
    files.push_back(fmt::format("{} .. {} ({} files)", rank_files.front(), rank_files.back(), rank_files.size()));
  line(fmt::format("  files       {} ({}, every checksum verified)", fmt::join(files, ", "), format_bytes(total_bytes)));

  nlohmann::json state = checkpoint.has_file("state.json") ? checkpoint.json("state.json") : nlohmann::json::object();
  if (state.contains("layout") && state["layout"].is_object()) {
    const nlohmann::json& l = state["layout"];
    auto get = [&](const char* key) { return l.contains(key) ? l[key].dump() : std::string("?"); };
    line(fmt::format("  layout      dp {} x ep {} x tp {} x pp {}, zero_stage {}", get("data_parallel"),
                     get("expert_parallel"), get("tensor_parallel"), get("pipeline_parallel"), get("zero_stage")));
  }
  if (state.contains("tokenizer") && state["tokenizer"].is_object()) {
    const nlohmann::json& t = state["tokenizer"];
    line(fmt::format("  tokenizer   {}{}", t.value("spec", "?"),
                     t.contains("file") ? fmt::format(" (carried as {}, sha256 {})", t.value("file", ""),
                                                      t.value("sha256", ""))
                                        : ""));
  }
  if (state.contains("numerics")) line(fmt::format("  numerics    {}", state["numerics"].dump()));

  // Tensors of every safetensors file (a sharded checkpoint: of its index), with totals per group.
  const CheckpointTensors index(checkpoint);
  if (index.sharded()) {
    std::vector<TableRow> params, moments;
    size_t pieces = 0;
    for (const std::string& name : index.names()) {
      const bool moment = name.rfind("exp_avg.", 0) == 0 || name.rfind("exp_avg_sq.", 0) == 0;
      const std::vector<int64_t> shape = index.shape(name);
      pieces += index.pieces(name);
      (moment ? moments : params)
          .push_back(TableRow{name, "F32", Shape::of(shape).str(), int64_t(index.bytes(name) / sizeof(float)),
                              index.bytes(name), index.pieces(name)});
    }
    line(fmt::format("sharded: {} tensors in {} pieces over {} rank files ({})", index.names().size(), pieces,
                     index.files().size(), kShardedIndexFile));
    line(fmt::format("parameters ({} tensors)", params.size()));
    tensor_table(params, true, line);
    std::vector<std::string> present;
    for (const std::string moment : {"exp_avg", "exp_avg_sq"}) {
      size_t found = 0;
      for (const TableRow& row : params) found += index.contains(moment + "." + row.name) ? 1 : 0;
      present.push_back(fmt::format("{} for {}/{} parameters", moment, found, params.size()));
    }
    line(fmt::format("optimizer state: {} ({} tensors, {})", state.value("optimizer", std::string("adamw")),
                     moments.size(), fmt::join(present, ", ")));
  } else {
    for (const std::string& name : checkpoint.files()) {
      if (!name.ends_with(".safetensors")) continue;
      const SafetensorsFile& file = checkpoint.tensors(name);
      std::string meta;
      for (const auto& [key, value] : file.metadata()) meta += fmt::format(" {}={}", key, value);
      line(fmt::format("{} ({} tensors{})", name, file.tensors().size(), meta.empty() ? "" : ";" + meta));
      std::vector<TableRow> rows;
      for (const auto& [tensor_name, tensor] : file.tensors())
        rows.push_back(TableRow{tensor_name, dtype_name(tensor.dtype), tensor.shape.str(), tensor.numel(),
                                uint64_t(tensor.nbytes()), 1});
      tensor_table(rows, false, line);
    }
    // Optimizer state: which moments are present for how many parameters.
    if (checkpoint.has_file("optimizer.safetensors") && checkpoint.has_file("model.safetensors")) {
      const auto& params = checkpoint.tensors("model.safetensors").tensors();
      const auto& state_tensors = checkpoint.tensors("optimizer.safetensors");
      std::string optimizer = "?";
      if (state_tensors.metadata().count("optimizer")) optimizer = state_tensors.metadata().at("optimizer");
      std::vector<std::string> present;
      for (const std::string moment : {"exp_avg", "exp_avg_sq"}) {
        size_t found = 0;
        for (const auto& entry : params) found += state_tensors.contains(moment + "." + entry.first) ? 1 : 0;
        present.push_back(fmt::format("{} for {}/{} parameters", moment, found, params.size()));
      }
      line(fmt::format("optimizer state: {} ({})", optimizer, fmt::join(present, ", ")));
    } else {
      line("optimizer state: none (no optimizer.safetensors)");
    }
  }
  if (state.contains("config") && state["config"].is_string()) {
    line("config:");
    std::istringstream config(state["config"].get<std::string>());
    for (std::string text; std::getline(config, text);) line("  " + text);
  }
  return out;
}

}  // namespace moe4d
