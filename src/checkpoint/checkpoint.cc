// checkpoint/checkpoint.cc — writing (tmp dir + fsync + rename) and verified reading of checkpoints.
#include "checkpoint/checkpoint.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "checkpoint/output_file.h"
#include "core/error.h"
#include "core/log.h"
#include "core/sha256.h"

namespace moe4d {
namespace fs = std::filesystem;

namespace {

constexpr const char* kManifest = "MANIFEST.json";
constexpr const char* kFormat = "moe4d-checkpoint";
constexpr int kVersion = 1;
constexpr const char* kTmpPrefix = ".tmp-";

std::string without_trailing_slash(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

// step_<digits> exactly as checkpoint_dir_name writes it.
bool parse_step_dir_name(const std::string& name, int64_t& step) {
  if (name.rfind("step_", 0) != 0 || name.size() < 13 || name.size() > 24) return false;
  if (!std::all_of(name.begin() + 5, name.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
  step = std::stoll(name.substr(5));
  return checkpoint_dir_name(step) == name;
}

// The writer pid at the end of a temporary name (`.tmp-step_00000010-4242`, `.tmp-latest-4242`).
bool parse_tmp_pid(const std::string& name, pid_t& pid) {
  const size_t dash = name.rfind('-');
  if (name.rfind(kTmpPrefix, 0) != 0 || dash == std::string::npos || dash + 1 == name.size()) return false;
  const std::string digits = name.substr(dash + 1);
  if (digits.size() > 9 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  pid = static_cast<pid_t>(std::stol(digits));
  return pid > 0;
}

bool process_alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

// Cleanup after a successful commit must not fail the commit: problems are logged instead.
void remove_quietly(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) log_warn("could not remove {}: {}", path, ec.message());
}

void write_text_durably(const std::string& path, const std::string& text) {
  OutputFile out(path);
  out.write(text.data(), text.size());
  out.finish();
}

void rename_or_fail(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0)
    fail("cannot rename {} to {}: {}", from, to, std::strerror(errno));
}

std::string short_hash(const std::string& hex) { return hex.substr(0, 12) + "…"; }

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read {}: {}", path, std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::string checkpoint_dir_name(int64_t step) { return fmt::format("step_{:08d}", step); }

bool parse_checkpoint_dir_name(const std::string& name, int64_t& step) { return parse_step_dir_name(name, step); }

std::string escaped_text(const std::string& bytes, size_t max_bytes) {
  std::string out;
  const size_t n = std::min(bytes.size(), max_bytes);
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(bytes[i]);
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c == '\\') out += "\\\\";
    else if (c < 0x20 || c >= 0x7f) out += fmt::format("\\x{:02x}", c);
    else out += static_cast<char>(c);
  }
  if (bytes.size() > n) out += fmt::format("...({} bytes)", bytes.size());
  return out;
}

CheckpointWriter::CheckpointWriter(std::string dir, int64_t step) : dir_(without_trailing_slash(std::move(dir))), step_(step) {
  if (step < 0) fail("checkpoint step {} is negative, expected a step >= 0", step);
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) fail("cannot create checkpoint directory {}: {}", dir_, ec.message());
  tmp_dir_ = fmt::format("{}/{}{}-{}", dir_, kTmpPrefix, checkpoint_dir_name(step_), ::getpid());
  fs::remove_all(tmp_dir_, ec);  // a leftover of an earlier process that had our pid
  if (!fs::create_directory(tmp_dir_, ec) || ec)
    fail("cannot create {}: {}", tmp_dir_, ec ? ec.message() : "it already exists");
}

CheckpointWriter::~CheckpointWriter() {
  if (!tmp_dir_.empty()) remove_quietly(tmp_dir_);
}

CheckpointWriter::CheckpointWriter(CheckpointWriter&& other) noexcept
    : dir_(std::move(other.dir_)), step_(other.step_), tmp_dir_(std::move(other.tmp_dir_)),
      files_(std::move(other.files_)) {
  other.tmp_dir_.clear();
}

void CheckpointWriter::check_new_file(const std::string& file_name) const {
  if (tmp_dir_.empty()) fail("checkpoint {} in {}: cannot add {} after commit", step_, dir_, file_name);
  if (file_name.empty() || file_name.find('/') != std::string::npos || file_name[0] == '.' || file_name == kManifest)
    fail("checkpoint file name '{}' is not allowed, expected a plain name (no '/', no leading '.', not {})",
         file_name, kManifest);
  if (files_.count(file_name)) fail("checkpoint {} in {}: file {} was already added", step_, dir_, file_name);
}

void CheckpointWriter::add_safetensors(const std::string& file_name, const NamedTensors& tensors,
                                       const SafetensorsMetadata& metadata) {
  check_new_file(file_name);
  OutputFile out(tmp_dir_ + "/" + file_name);
  write_safetensors(out, tensors, metadata);
  std::string sha = out.finish();
  files_[file_name] = {out.bytes_written(), std::move(sha)};
}

void CheckpointWriter::add_json(const std::string& file_name, const nlohmann::json& value) {
  check_new_file(file_name);
  const std::string text = value.dump(2) + "\n";
  OutputFile out(tmp_dir_ + "/" + file_name);
  out.write(text.data(), text.size());
  std::string sha = out.finish();
  files_[file_name] = {out.bytes_written(), std::move(sha)};
}

std::string CheckpointWriter::add_file_copy(const std::string& file_name, const std::string& source) {
  check_new_file(file_name);
  const int fd = ::open(source.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open {} to copy it into checkpoint {}: {}", source, step_, std::strerror(errno));
  OutputFile out(tmp_dir_ + "/" + file_name);
  std::vector<char> block(size_t{1} << 20);
  while (true) {
    const ssize_t n = ::read(fd, block.data(), block.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int saved = errno;
      ::close(fd);
      fail("cannot read {}: {}", source, std::strerror(saved));
    }
    if (n == 0) break;
    try {
      out.write(block.data(), static_cast<size_t>(n));
    } catch (const Error&) {
      ::close(fd);
      throw;
    }
  }
  ::close(fd);
  std::string sha = out.finish();
  files_[file_name] = {out.bytes_written(), sha};
  return sha;
}

void CheckpointWriter::add_stream(const std::string& file_name, const std::function<void(OutputFile&)>& write) {
  check_new_file(file_name);
  OutputFile out(tmp_dir_ + "/" + file_name);
  write(out);
  std::string sha = out.finish();
  files_[file_name] = {out.bytes_written(), std::move(sha)};
}

void CheckpointWriter::add_written_file(const std::string& file_name, uint64_t bytes, const std::string& sha256) {
  check_new_file(file_name);
  const std::string path = tmp_dir_ + "/" + file_name;
  std::error_code ec;
  const uint64_t found = fs::file_size(path, ec);
  if (ec) fail("checkpoint {} in {}: {} was not written ({})", step_, dir_, path, ec.message());
  if (found != bytes) fail("checkpoint {} in {}: {} has {} bytes, its writer reported {}", step_, dir_, path, found, bytes);
  files_[file_name] = {bytes, sha256};
}

std::string CheckpointWriter::commit(int keep) {
  if (tmp_dir_.empty()) fail("checkpoint {} in {}: commit called twice", step_, dir_);
  if (keep < 1) fail("checkpoint keep {} is invalid, expected at least 1 (the new checkpoint is always kept)", keep);
  const std::string name = checkpoint_dir_name(step_);
  const std::string final_dir = dir_ + "/" + name;

  // 1. The manifest is written last, so a directory with a manifest has all of its files.
  nlohmann::json files = nlohmann::json::object();
  for (const auto& [file, info] : files_) files[file] = {{"bytes", info.first}, {"sha256", info.second}};
  const nlohmann::json manifest = {{"format", kFormat}, {"version", kVersion}, {"step", step_}, {"files", files}};
  write_text_durably(tmp_dir_ + "/" + kManifest, manifest.dump(2) + "\n");
  fsync_directory(tmp_dir_);

  // 2. Publish. An existing step_<S> is swapped out atomically (it then sits at our tmp path and
  //    is removed); where the file system cannot exchange, it is moved aside first.
  std::error_code ec;
  if (fs::exists(final_dir, ec)) {
    if (::renameat2(AT_FDCWD, tmp_dir_.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) == 0) {
      remove_quietly(tmp_dir_);
    } else if (errno == EINVAL || errno == ENOSYS) {
      const std::string aside = fmt::format("{}/{}{}-replaced-{}", dir_, kTmpPrefix, name, ::getpid());
      rename_or_fail(final_dir, aside);
      rename_or_fail(tmp_dir_, final_dir);
      remove_quietly(aside);
    } else {
      fail("cannot replace {} with {}: {}", final_dir, tmp_dir_, std::strerror(errno));
    }
  } else {
    rename_or_fail(tmp_dir_, final_dir);
  }
  tmp_dir_.clear();
  fsync_directory(dir_);

  // 3. Point `latest` at it (write a temporary file, then rename over the old one).
  const std::string latest_tmp = fmt::format("{}/{}latest-{}", dir_, kTmpPrefix, ::getpid());
  write_text_durably(latest_tmp, name + "\n");
  rename_or_fail(latest_tmp, dir_ + "/latest");
  fsync_directory(dir_);

  // 4. Retention: the new checkpoint plus the keep-1 newest others survive. A checkpoint is first
  //    renamed to a temporary name, so a crash mid-deletion never leaves a half-deleted step_<S>.
  std::vector<CheckpointEntry> others;
  for (CheckpointEntry& entry : list_checkpoints(dir_))
    if (entry.step != step_) others.push_back(std::move(entry));
  std::sort(others.begin(), others.end(), [](const auto& a, const auto& b) { return a.step > b.step; });
  for (size_t i = static_cast<size_t>(keep - 1); i < others.size(); ++i) {
    const std::string doomed =
        fmt::format("{}/{}{}-{}", dir_, kTmpPrefix, checkpoint_dir_name(others[i].step), ::getpid());
    if (std::rename(others[i].path.c_str(), doomed.c_str()) == 0) remove_quietly(doomed);
    else log_warn("could not remove old checkpoint {}: {}", others[i].path, std::strerror(errno));
  }

  // 5. Temporary directories and files of writers that died before committing.
  for (const auto& item : fs::directory_iterator(dir_, ec)) {
    pid_t pid = 0;
    if (parse_tmp_pid(item.path().filename().string(), pid) && pid != ::getpid() && !process_alive(pid))
      remove_quietly(item.path().string());
  }
  return final_dir;
}

std::vector<CheckpointEntry> list_checkpoints(const std::string& root) {
  std::vector<CheckpointEntry> out;
  std::error_code ec;
  for (const auto& item : fs::directory_iterator(root, ec)) {
    int64_t step = 0;
    std::error_code item_ec;
    if (item.is_directory(item_ec) && parse_step_dir_name(item.path().filename().string(), step) &&
        fs::exists(item.path() / kManifest, item_ec))
      out.push_back(CheckpointEntry{step, without_trailing_slash(root) + "/" + item.path().filename().string()});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
  return out;
}

Checkpoint Checkpoint::open(const std::string& path) { return open(path, {}); }

Checkpoint Checkpoint::open(const std::string& path_in, const std::function<bool(const std::string&)>& hash_file) {
  std::string dir = without_trailing_slash(path_in);
  std::error_code ec;
  std::string via_latest;  // "<root>/latest" when that file named the step directory
  if (!fs::exists(dir + "/" + kManifest, ec) && fs::is_regular_file(dir + "/latest", ec)) {
    via_latest = dir + "/latest";
    std::string name = read_text(dir + "/latest");
    name.erase(name.find_last_not_of(" \t\r\n") + 1);
    int64_t latest_step = 0;
    if (!parse_step_dir_name(name, latest_step))
      fail("{}/latest names '{}', expected a step directory name like {}", dir, escaped_text(name),
           checkpoint_dir_name(0));
    dir += "/" + name;
  }

  // Everything below names the previous complete checkpoint, the one to fall back to.
  int64_t step = 0;
  const bool named_by_step = parse_step_dir_name(fs::path(dir).filename().string(), step);
  const auto corrupt = [&](const std::string& what) {
    std::string parent = fs::path(dir).parent_path().string();
    std::string previous = "no previous checkpoint";
    for (const CheckpointEntry& entry : list_checkpoints(parent.empty() ? "." : parent))
      if (named_by_step && entry.step < step) previous = "previous checkpoint: " + entry.path;
    const std::string named_by = via_latest.empty() ? "" : fmt::format(" (named by {})", via_latest);
    fail("checkpoint {}{} is corrupt: {}; {}", dir, named_by, what, previous);
  };

  if (!fs::is_directory(dir, ec)) {
    if (named_by_step) corrupt("the directory is missing");
    fail("no checkpoint at {}: no such directory", dir);
  }
  if (!fs::exists(dir + "/" + kManifest, ec)) {
    if (named_by_step) corrupt(fmt::format("{} is missing (the write did not complete)", kManifest));
    fail("{} is not a checkpoint, expected a step directory with {} or a checkpoint root with a 'latest' file", dir,
         kManifest);
  }

  nlohmann::json manifest;
  try {
    manifest = nlohmann::json::parse(read_text(dir + "/" + kManifest));
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for a number overflow
    corrupt(fmt::format("{} is not valid JSON ({})", kManifest, e.what()));
  }
  if (!manifest.is_object() || !manifest["format"].is_string() || manifest["format"] != kFormat)
    corrupt(fmt::format("{} has no \"format\": \"{}\"", kManifest, kFormat));
  if (!manifest["version"].is_number_integer() || manifest["version"].get<int64_t>() != kVersion)
    corrupt(fmt::format("{} has version {}, expected {}", kManifest, manifest["version"].dump(), kVersion));
  if (!manifest["step"].is_number_integer()) corrupt(fmt::format("{} has no integer \"step\"", kManifest));
  if (named_by_step && manifest["step"].get<int64_t>() != step)
    corrupt(fmt::format("{} says step {}, expected {}", kManifest, manifest["step"].get<int64_t>(), step));
  if (!manifest["files"].is_object()) corrupt(fmt::format("{} has no \"files\" object", kManifest));

  Checkpoint checkpoint;
  checkpoint.path_ = dir;
  checkpoint.step_ = manifest["step"].get<int64_t>();
  for (const auto& [name, info] : manifest["files"].items()) {
    if (name.empty() || name.find('/') != std::string::npos || name[0] == '.' || !info.is_object() ||
        !info["bytes"].is_number_unsigned() || !info["sha256"].is_string())
      corrupt(fmt::format("{} entry '{}' is malformed", kManifest, name));
    const std::string file = dir + "/" + name;
    const uint64_t expected_bytes = info["bytes"].get<uint64_t>();
    const std::string expected_sha = info["sha256"].get<std::string>();
    if (!fs::is_regular_file(file, ec)) corrupt(fmt::format("{} is missing", name));
    const uint64_t bytes = fs::file_size(file, ec);
    if (ec) corrupt(fmt::format("{} cannot be read ({})", name, ec.message()));
    if (bytes != expected_bytes) corrupt(fmt::format("{} has {} bytes, expected {}", name, bytes, expected_bytes));
    if (hash_file && !hash_file(name)) {
      checkpoint.files_[name] = bytes;
      continue;
    }
    const std::string sha = sha256_file(file);
    if (sha != expected_sha)
      corrupt(fmt::format("{} sha256 mismatch (expected {}, got {})", name, short_hash(expected_sha), short_hash(sha)));
    checkpoint.files_[name] = bytes;
  }
  return checkpoint;
}

std::vector<std::string> Checkpoint::files() const {
  std::vector<std::string> names;
  for (const auto& entry : files_) names.push_back(entry.first);
  return names;
}

std::string Checkpoint::file_path(const std::string& name) const {
  if (!files_.count(name)) fail("checkpoint {} has no file {} in its manifest", path_, name);
  return path_ + "/" + name;
}

const SafetensorsFile& Checkpoint::tensors(const std::string& name) const {
  auto it = mapped_.find(name);
  if (it == mapped_.end())
    it = mapped_.emplace(name, std::make_unique<SafetensorsFile>(SafetensorsFile::open(file_path(name)))).first;
  return *it->second;
}

nlohmann::json Checkpoint::json(const std::string& name) const {
  const std::string path = file_path(name);
  try {
    return nlohmann::json::parse(read_text(path));
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for a number overflow
    fail("{}: not valid JSON ({})", path, e.what());
  }
}

}  // namespace moe4d
