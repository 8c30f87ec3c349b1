// report/run_report.cc — which pictures a run gets, and writing them (run_report.h).
#include "report/run_report.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "report/rank_times.h"
#include "report/run_pictures.h"

namespace moe4d {

namespace fs = std::filesystem;

std::string resolve_metrics_path(const std::string& metrics_or_run_dir) {
  std::error_code ec;
  if (fs::is_directory(metrics_or_run_dir, ec)) {
    const std::string path = (fs::path(metrics_or_run_dir) / "metrics.jsonl").string();
    if (!fs::exists(path, ec)) fail("run directory {} has no metrics.jsonl", metrics_or_run_dir);
    return path;
  }
  if (!fs::exists(metrics_or_run_dir, ec)) {
    fail("{} does not exist (expected a metrics JSONL file or a run directory containing metrics.jsonl)",
         metrics_or_run_dir);
  }
  return metrics_or_run_dir;
}

std::vector<std::pair<std::string, std::string>> render_run_report(const MetricsLog& log) {
  std::vector<std::pair<std::string, std::string>> files;
  auto add = [&files](std::string name, std::string svg) {
    if (!svg.empty()) files.emplace_back(std::move(name), std::move(svg));
  };
  add("loss.svg", loss_picture(log));
  add("lr.svg", lr_picture(log));
  add("throughput.svg", throughput_picture(log));
  add("step_time.svg", step_time_picture(log));
  for (int layer : moe_layers(log)) add(fmt::format("expert_load_layer{}.svg", layer), expert_load_picture(log, layer));
  for (int layer : replicated_layers(log))
    add(fmt::format("replication_layer{}.svg", layer), replication_picture(log, layer));
  add("pipeline_timeline.svg", pipeline_timeline_picture(log));
  add("pipeline_bubble.svg", pipeline_bubble_picture(log));
  add("rank_compute.svg", rank_compute_picture(log));
  add("memory.svg", memory_picture(log));
  add("moe_losses.svg", moe_losses_picture(log));
  add("comm_share.svg", comm_share_picture(log));
  return files;
}

std::vector<std::string> write_run_report(const std::string& metrics_path, const std::string& output_dir) {
  const MetricsLog log = read_metrics_log(metrics_path);
  fs::path dir = output_dir.empty() ? fs::path(metrics_path).parent_path() : fs::path(output_dir);
  if (dir.empty()) dir = ".";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    fail("cannot create output directory {}: {}", dir.string(), ec ? ec.message() : "a file is in the way");
  }
  std::vector<std::string> written;
  std::vector<std::pair<std::string, std::string>> files = render_run_report(log);
  files.emplace_back("index.html", run_index_html(log, files));  // last: it shows the pictures above
  for (const auto& [name, content] : files) {
    const std::string path = (dir / name).string();
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << content;
    out.close();
    if (!out) fail("cannot write {}: {}", path, std::strerror(errno));
    written.push_back(path);
  }
  return written;
}

}  // namespace moe4d
