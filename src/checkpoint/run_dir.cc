// checkpoint/run_dir.cc — is a run directory in use, is it writable, where --resume starts.
#include "checkpoint/run_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>

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
  const std::vector<CheckpointEntry> entries = list_checkpoints(root);
  std::error_code ec;
  const std::string latest = root + "/latest";
  const bool has_latest = fs::exists(latest, ec);

  // What `latest` says is judged on its own: a damaged pointer never rules out (or in) a step
  // directory, each of which stands or falls by its own manifest.
  std::string latest_name;     // the step directory it names; empty when it names none
  std::string latest_problem;  // why it is not used as is; empty when it is
  if (has_latest) {
    std::string text;
    std::ifstream in(latest, std::ios::binary);
    if (in) text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    std::string name = text;
    name.erase(name.find_last_not_of(" \t\r\n") + 1);
    int64_t step = 0;
    if (!in) latest_problem = fmt::format("{} cannot be read: {}", latest, std::strerror(errno));
    else if (parse_checkpoint_dir_name(name, step)) latest_name = name;
    else latest_problem = fmt::format("{} holds '{}', expected a step directory name like {}", latest,
                                      escaped_text(text), checkpoint_dir_name(0));
  } else {
    latest_problem = fmt::format("{} is missing", latest);
  }
  if (entries.empty()) {
    if (!has_latest) return point;  // nothing to resume: a run that never checkpointed
    if (latest_problem.empty())
      latest_problem = fmt::format("{} names {}, which is not a complete checkpoint", latest, latest_name);
    fail("--resume: {}; and {} holds no other checkpoint (step_<N> directory with a MANIFEST.json); pass "
         "--start-over to move the directory aside and start fresh",
         latest_problem, root);
  }

  // The newest step directory that verifies, whatever `latest` says.
  std::vector<std::string> refused;
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    const bool named_by_latest = !latest_name.empty() && it->path == root + "/" + latest_name;
    try {
      // Through the root when `latest` names it, so that a refusal says "(named by .../latest)".
      const Checkpoint checkpoint = Checkpoint::open(named_by_latest ? root : it->path);
      point.path = checkpoint.path();
      point.step = checkpoint.step();
      break;
    } catch (const Error& e) {
      if (named_by_latest) latest_problem = e.what();
      else refused.push_back(e.what());
    }
  }
  if (point.path.empty())
    fail("--resume: no checkpoint in {} verifies ({}{}{}); refusing to start from step 0 over them: pass "
         "--start-over to move the directory aside and start fresh",
         root, latest_problem, latest_problem.empty() || refused.empty() ? "" : "; ", fmt::join(refused, "; "));

  const bool chosen_by_latest = !latest_name.empty() && point.path == root + "/" + latest_name;
  if (latest_problem.empty() && !chosen_by_latest) {
    const std::string named = root + "/" + latest_name;
    if (!fs::is_directory(named, ec))
      latest_problem = fmt::format("{} names {}, which does not exist", latest, latest_name);
    else if (!fs::exists(named + "/MANIFEST.json", ec))
      latest_problem = fmt::format("{} names {}, which has no MANIFEST.json (its write did not complete)", latest,
                                   latest_name);
    else
      latest_problem = fmt::format("{} names {}, older than {} (the run stopped before updating it)", latest,
                                   latest_name, fs::path(point.path).filename().string());
  }
  if (!latest_problem.empty())
    point.notice = fmt::format("--resume: not using {}: {}; resuming from {}, the newest checkpoint that verifies",
                               latest, latest_problem, point.path);
  else if (!refused.empty())
    point.notice = fmt::format("--resume: resuming from {} (named by {}), the newest checkpoint that verifies", point.path,
                               latest);
  if (!refused.empty()) point.notice += fmt::format(" (refused: {})", fmt::join(refused, "; "));
  return point;
}

}  // namespace moe4d
