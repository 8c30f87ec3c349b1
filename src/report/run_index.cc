// report/run_index.cc — index.html: every picture of a run on one page, each with the numbers a
// reader looks for first (one file to open in a browser; the pictures are referenced, not copied).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "report/run_pictures.h"
#include "report/svg.h"

namespace moe4d {
namespace {

// Mean over the steps of a per-step value (NaN-free steps only).
template <typename F>
double mean_of(const MetricsLog& log, F value) {
  std::vector<double> v;
  for (const StepMetrics& m : log.steps) v.push_back(value(m));
  return mean_finite(v);
}

std::string num(double v, const char* format = "{:.4g}") { return std::isfinite(v) ? fmt::format(fmt::runtime(format), v) : "n/a"; }

const StepMetrics* last_with(const MetricsLog& log, double StepMetrics::*field) {
  const StepMetrics* found = nullptr;
  for (const StepMetrics& m : log.steps)
    if (std::isfinite(m.*field)) found = &m;
  return found;
}

std::string comm_numbers(const MetricsLog& log) {
  std::string out;
  for (const char* g : {"tp", "ep", "dp", "pp", "other"}) {
    const double share = mean_of(log, [&](const StepMetrics& m) {
      const auto it = m.comm_exposed_by_group.find(g);
      return it == m.comm_exposed_by_group.end() || !(m.step_s > 0) ? NAN : 100 * it->second / m.step_s;
    });
    if (!std::isfinite(share) || share <= 0) continue;
    out += fmt::format("{} {:.1f}%", g, share);
    const double waiting = mean_of(log, [&](const StepMetrics& m) {
      const auto it = m.comm_waiting_by_group.find(g);
      return it == m.comm_waiting_by_group.end() || !(m.step_s > 0) ? NAN : 100 * it->second / m.step_s;
    });
    const double transfer = mean_of(log, [&](const StepMetrics& m) {
      const auto it = m.comm_transfer_by_group.find(g);
      return it == m.comm_transfer_by_group.end() || !(m.step_s > 0) ? NAN : 100 * it->second / m.step_s;
    });
    if (std::isfinite(waiting)) out += fmt::format(" (traced steps: waiting {:.1f}%, transfer {:.1f}%)", waiting, transfer);
    out += "; ";
  }
  return out.empty() ? "no exposed communication recorded" : "mean exposed share of the step: " + out.substr(0, out.size() - 2);
}

std::string numbers_for(const std::string& file, const MetricsLog& log) {
  const StepMetrics& last = log.steps.back();
  if (file == "loss.svg") {
    const StepMetrics* val = last_with(log, &StepMetrics::val_loss);
    return fmt::format("final train loss {} (step {}); val loss {}", num(last.loss), last.step,
                       val ? num(val->val_loss) + fmt::format(" (step {})", val->step) : "n/a");
  }
  if (file == "lr.svg") return fmt::format("final lr {}; final gradient norm {}", num(last.lr, "{:.3e}"), num(last.grad_norm));
  if (file == "throughput.svg")
    return fmt::format("mean {} tokens/s; mean {} model TFLOP/s",
                       num(mean_of(log, [](const StepMetrics& m) { return m.tokens_per_s; }), "{:.0f}"),
                       num(mean_of(log, [](const StepMetrics& m) { return m.model_tflops_per_s; }), "{:.3g}"));
  if (file == "step_time.svg")
    return fmt::format("mean step {} s, compute {} s, exposed communication {} s",
                       num(mean_of(log, [](const StepMetrics& m) { return m.step_s; })),
                       num(mean_of(log, [](const StepMetrics& m) { return m.compute_s; })),
                       num(mean_of(log, [](const StepMetrics& m) { return m.comm_exposed_s; })));
  if (file == "comm_share.svg") return comm_numbers(log);
  if (file == "moe_losses.svg")
    return fmt::format("final aux loss {}, z loss {}, dropped {}%", num(last.aux_loss), num(last.z_loss),
                       num(100 * last.dropped_fraction, "{:.2f}"));
  if (file == "memory.svg" && !last.memory.empty()) {
    double peak = 0;
    size_t at = 0;
    for (size_t r = 0; r < last.memory.size(); ++r) {
      const RankMemoryRecord& m = last.memory[r];
      const double total = m.params + m.grads + m.optimizer + m.activations;
      if (total > peak) peak = total, at = r;
    }
    return fmt::format("largest: rank {} with {:.3f} GiB (step {})", at, peak / (1024.0 * 1024 * 1024), last.step);
  }
  if (file.rfind("expert_load_layer", 0) == 0) {
    for (const ExpertLoad& l : last.expert_loads)
      if (file == fmt::format("expert_load_layer{}.svg", l.layer))
        return fmt::format("layer {}: busiest expert {}x the mean at step {}", l.layer, num(l.imbalance, "{:.2f}"),
                           last.step);
  }
  if (file == "pipeline_bubble.svg" || file == "pipeline_timeline.svg") {
    const StepMetrics* p = last_with(log, &StepMetrics::bubble_measured);
    if (p)
      return fmt::format("{} schedule, {} stages: bubble measured {:.1f}%, formula {:.1f}% (step {})",
                         p->pipeline_schedule, p->pipeline_stages, 100 * p->bubble_measured, 100 * p->bubble_formula,
                         p->step);
  }
  return {};
}

}  // namespace

std::string run_index_html(const MetricsLog& log, const std::vector<std::pair<std::string, std::string>>& pictures) {
  if (log.steps.empty()) return {};
  std::string html = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>moe4d run: {0}</title>\n"
      "<style>body{{font-family:sans-serif;max-width:860px;margin:2em auto;color:#222}}"
      "img{{width:820px;border:1px solid #ddd}}p.n{{color:#444}}</style>\n</head>\n<body>\n"
      "<h1>moe4d run</h1>\n<p>{0}: steps {1} to {2}</p>\n",
      xml_escape(log.path), log.steps.front().step, log.steps.back().step);
  for (const auto& [file, content] : pictures) {
    if (file.size() < 4 || file.substr(file.size() - 4) != ".svg") continue;
    html += fmt::format("<h2 id=\"{0}\">{0}</h2>\n", xml_escape(file));
    const std::string numbers = numbers_for(file, log);
    if (!numbers.empty()) html += fmt::format("<p class=\"n\">{}</p>\n", xml_escape(numbers));
    html += fmt::format("<img src=\"{0}\" alt=\"{0}\">\n", xml_escape(file));
  }
  html += "</body>\n</html>\n";
  return html;
}

}  // namespace moe4d
