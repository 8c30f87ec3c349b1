// checkpoint/run_dir.cc — is a run directory in use, is it writable, where --resume starts.
#include "checkpoint/run_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "checkpoint/checkpoint.h"
#include "core/error.h"

namespace moe4d {
namespace fs = std::filesystem;

namespace {

bool non_empty_file(const std::string& path) {
  std::error_code ec;
  return !path.empty() && fs::is_regular_file(path, ec) && fs::file_size(path, ec) > 0 && !ec;
}

std::string utc_stamp() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y%m%dT%H%M%SZ", &tm);
  return text;
}

// True when `inner` is `outer` or lies inside it (both made absolute, lexically normalised).
bool is_within(const fs::path& inner, const fs::path& outer) {
  const fs::path a = fs::absolute(inner).lexically_normal(), b = fs::absolute(outer).lexically_normal();
  auto ai = a.begin();
  for (auto bi = b.begin(); bi != b.end(); ++bi, ++ai) {
    if (bi->empty()) continue;  // trailing separator
    if (ai == a.end() || *ai != *bi) return false;
  }
  return true;
}

}  // namespace

std::string RunDirContents::describe(const std::string& metrics_path) const {
  std::vector<std::string> parts;
  if (checkpoints.size() == 1) parts.push_back("checkpoint " + checkpoints.front());
  if (checkpoints.size() > 1)
    parts.push_back(fmt::format("{} checkpoints ({} .. {})", checkpoints.size(), checkpoints.front(), checkpoints.back()));
  if (has_latest) parts.push_back("latest");
  if (has_metrics) parts.push_back(fs::path(metrics_path).filename().string());
  return fmt::format("{}", fmt::join(parts, ", "));
}

RunDirContents inspect_run_dir(const std::string& dir, const std::string& metrics_path) {
  RunDirContents contents;
  std::error_code ec;
  if (!dir.empty()) {
    for (const CheckpointEntry& entry : list_checkpoints(dir))
      contents.checkpoints.push_back(fs::path(entry.path).filename().string());
    contents.has_latest = fs::exists(fs::path(dir) / "latest", ec);
  }
  contents.has_metrics = non_empty_file(metrics_path);
  return contents;
}

std::string used_run_dir_message(const std::string& dir, const RunDirContents& contents,
                                 const std::string& metrics_path) {
  const std::string where = !dir.empty() ? fmt::format("checkpoint.dir {}", dir) : fmt::format("{}", metrics_path);
  return fmt::format("{} already holds a run ({}); pass --resume to continue it, or --start-over to move it aside "
                     "(renamed to {}.old-<time>, nothing is deleted) and start fresh",
                     where, contents.describe(metrics_path), dir.empty() ? metrics_path : dir);
}

std::string move_run_aside(const std::string& dir_in, const std::string& metrics_path) {
  std::string dir = dir_in;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const std::string stamp = utc_stamp();
  std::error_code ec;
  std::string moved;
  const bool metrics_outside = !metrics_path.empty() && (dir.empty() || !is_within(metrics_path, dir));
  if (!dir.empty() && fs::exists(dir, ec)) {
    if (is_within(fs::current_path(), dir))
      fail("--start-over cannot move checkpoint.dir {} aside: it is (or contains) the working directory {}; "
           "run from elsewhere or rename it yourself",
           dir, fs::current_path().string());
    const std::string target = fmt::format("{}.old-{}", dir, stamp);
    if (fs::exists(target, ec)) fail("--start-over: {} already exists; try again in a second", target);
    if (std::rename(dir.c_str(), target.c_str()) != 0)
      fail("--start-over: cannot rename {} to {}: {}", dir, target, std::strerror(errno));
    moved = target;
  }
  if (metrics_outside && fs::exists(metrics_path, ec)) {
    const std::string target = fmt::format("{}.old-{}", metrics_path, stamp);
    if (fs::exists(target, ec)) fail("--start-over: {} already exists; try again in a second", target);
    if (std::rename(metrics_path.c_str(), target.c_str()) != 0)
      fail("--start-over: cannot rename {} to {}: {}", metrics_path, target, std::strerror(errno));
    if (moved.empty()) moved = target;
  }
  return moved;
}

void require_writable_dir(const std::string& dir, const std::string& what) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) fail("{} {} is not a directory", what, dir);
  fs::create_directories(dir, ec);
  if (ec) fail("cannot create {} {}: {}", what, dir, ec.message());
  // access(W_OK) is always true for root and blind to read-only mounts: try the real thing.
  const std::string probe = fmt::format("{}/.tmp-write-probe-{}", dir, ::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("{} {} is not writable: {}", what, dir, std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

ResumePoint find_resume_point(const std::string& root_in) {
  std::string root = root_in;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  ResumePoint point;
  std::vector<CheckpointEntry> entries = list_checkpoints(root);
  std::error_code ec;
  const std::string latest = root + "/latest";
  std::string latest_problem;
  std::string latest_target;  // the step directory `latest` names (already tried below)
  if (fs::exists(latest, ec)) {
    std::ifstream in(latest);
    std::getline(in, latest_target);
    latest_target = root + "/" + latest_target;
    try {
      const Checkpoint checkpoint = Checkpoint::open(root);
      point.path = checkpoint.path();
      point.step = checkpoint.step();
      return point;
    } catch (const Error& e) {
      latest_problem = e.what();
    }
  } else {
    latest_problem = fmt::format("{} is missing", latest);
  }
  if (entries.empty()) {
    if (!fs::exists(latest, ec)) return point;  // nothing to resume: a run that never checkpointed
    fail("--resume: {}; and {} holds no other checkpoint (step_<N> directory with a MANIFEST.json); pass "
         "--start-over to move the directory aside and start fresh",
         latest_problem, root);
  }
  std::vector<std::string> refused;
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    if (it->path == latest_target) continue;
    try {
      const Checkpoint checkpoint = Checkpoint::open(it->path);
      point.path = checkpoint.path();
      point.step = checkpoint.step();
      point.notice = fmt::format("--resume: not using {}: {}; resuming from {}, the newest checkpoint that verifies",
                                 latest, latest_problem, point.path);
      if (!refused.empty()) point.notice += fmt::format(" (refused: {})", fmt::join(refused, "; "));
      return point;
    } catch (const Error& e) {
      refused.push_back(e.what());
    }
  }
  fail("--resume: no checkpoint in {} verifies ({}; {}); refusing to start from step 0 over them: pass "
       "--start-over to move the directory aside and start fresh",
       root, latest_problem, fmt::join(refused, "; "));
}

}  // namespace moe4d
