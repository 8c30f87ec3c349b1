// report/run_pictures.cc — the training-progress pictures (loss, lr, throughput, step time) and
// the helpers every picture uses.
#include "report/run_pictures.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "report/step_buckets.h"

namespace moe4d {

namespace {

// A log axis pays off when the finite positive values span more than a factor of 20.
bool wants_log(const LineSeries& s) {
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  for (double v : s.y) {
    if (!std::isfinite(v)) continue;
    if (v <= 0) return false;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  return hi > 0 && hi / lo > 20;
}

}  // namespace

double mean_finite(const std::vector<double>& values) {
  double sum = 0;
  size_t n = 0;
  for (double v : values) {
    if (std::isfinite(v)) {
      sum += v;
      ++n;
    }
  }
  return n ? sum / double(n) : std::numeric_limits<double>::quiet_NaN();
}

LineSeries series_of(const MetricsLog& log, const std::string& name, double StepMetrics::*field, bool only_present) {
  LineSeries s;
  s.name = name;
  for (const StepMetrics& m : log.steps) {
    if (only_present && !std::isfinite(m.*field)) continue;
    s.x.push_back(double(m.step));
    s.y.push_back(m.*field);
  }
  return s;
}

LineChart step_chart(std::string title, std::string y_label) {
  LineChart chart;
  chart.title = std::move(title);
  chart.x_label = "step";
  chart.y_label = std::move(y_label);
  chart.integer_x = true;
  return chart;
}

bool has_data(const LineSeries& s) {
  return std::any_of(s.y.begin(), s.y.end(), [](double v) { return std::isfinite(v); });
}

std::string loss_picture(const MetricsLog& log) {
  const bool any = std::any_of(log.steps.begin(), log.steps.end(), [](const StepMetrics& m) {
    return std::isfinite(m.loss) || std::isfinite(m.total_loss) || std::isfinite(m.val_loss);
  });
  if (!any) return {};
  LineChart chart = step_chart("Loss", "cross-entropy (nats / token)");
  // total_loss adds the MoE aux and z terms; equal to the loss for dense models, then not worth a
  // line. Drawn first and in grey, so that the train loss stays on top of it.
  const bool total_differs = std::any_of(log.steps.begin(), log.steps.end(), [](const StepMetrics& m) {
    return std::isfinite(m.total_loss) && std::isfinite(m.loss) &&
           std::abs(m.total_loss - m.loss) > 1e-9 * std::abs(m.loss);
  });
  if (total_differs) {
    chart.series.push_back(series_of(log, "total loss (+ aux, z terms)", &StepMetrics::total_loss));
    chart.series.back().color = "#bab0ac";
  }
  chart.series.push_back(series_of(log, "train loss", &StepMetrics::loss));
  chart.series.back().color = palette_color(0);
  LineSeries val = series_of(log, "val loss", &StepMetrics::val_loss, /*only_present=*/true);
  val.color = palette_color(2);
  if (has_data(val)) chart.series.push_back(std::move(val));
  return line_chart(chart);
}

std::string lr_picture(const MetricsLog& log) {
  const bool any = std::any_of(log.steps.begin(), log.steps.end(),
                               [](const StepMetrics& m) { return std::isfinite(m.lr) || std::isfinite(m.grad_norm); });
  if (!any) return {};
  const double panel_h = 300;
  Svg svg(kPictureWidth, 2 * panel_h);
  svg.title("Learning rate and gradient norm");
  LineChart lr = step_chart("Learning rate", "lr");
  lr.y_from_zero = true;
  lr.series.push_back(series_of(log, "lr", &StepMetrics::lr));
  draw_line_chart(svg, {0, 0, kPictureWidth, panel_h}, lr);
  LineChart norm = step_chart("Gradient norm (before clipping)", "global L2 norm");
  norm.series.push_back(series_of(log, "grad norm", &StepMetrics::grad_norm));
  norm.log_y = wants_log(norm.series[0]);
  draw_line_chart(svg, {0, panel_h, kPictureWidth, panel_h}, norm);
  return svg.str();
}

std::string throughput_picture(const MetricsLog& log) {
  LineChart tokens = step_chart("Throughput", "tokens / s");
  tokens.y_from_zero = true;
  tokens.series.push_back(series_of(log, "tokens/s", &StepMetrics::tokens_per_s));
  if (!has_data(tokens.series[0])) return {};
  LineSeries tflops = series_of(log, "model TFLOP/s", &StepMetrics::model_tflops_per_s);
  if (!has_data(tflops)) return line_chart(tokens);
  const double panel_h = 300;
  Svg svg(kPictureWidth, 2 * panel_h);
  svg.title("Throughput");
  draw_line_chart(svg, {0, 0, kPictureWidth, panel_h}, tokens);
  LineChart flops = step_chart("Model FLOP rate (6 x active matmul params + attention, whole job)", "TFLOP/s");
  flops.y_from_zero = true;
  flops.series.push_back(std::move(tflops));
  draw_line_chart(svg, {0, panel_h, kPictureWidth, panel_h}, flops);
  return svg.str();
}

// Compute plus the exposed (not overlapped) communication of each parallel group, per step.
std::string step_time_picture(const MetricsLog& log) {
  std::vector<const StepMetrics*> timed;
  for (const StepMetrics& m : log.steps) {
    if (std::isfinite(m.step_s) || std::isfinite(m.compute_s)) timed.push_back(&m);
  }
  if (timed.empty()) return {};
  // Groups in the order of the layout (tp fastest ... pp), then any group a newer writer adds.
  std::vector<std::string> groups = {"tp", "ep", "dp", "pp", "other"};
  for (const StepMetrics* m : timed) {
    for (const auto& [g, v] : m->comm_exposed_by_group) {
      if (std::find(groups.begin(), groups.end(), g) == groups.end()) groups.push_back(g);
    }
  }
  std::vector<int64_t> step_numbers;
  for (const StepMetrics* m : timed) step_numbers.push_back(m->step);
  const StepBuckets grouped = bucket_steps(step_numbers, kMaxColumns);
  StackedBars bars;
  bars.title = "Step time breakdown";
  bars.x_label = "step";
  bars.y_label = "seconds per step";
  bars.integer_x = true;
  bars.note = oversubscription_note(log);
  std::vector<std::vector<double>> per_group(groups.size());
  // Traced steps split a group's exposed time into waiting for the last member and transfer.
  std::vector<std::vector<double>> waiting(groups.size()), transfer(groups.size());
  std::vector<double> compute;
  for (const StepBucket& bucket : grouped.buckets) {
    const size_t b = bucket.begin, e = bucket.end;
    std::vector<double> c, g(groups.size(), 0.0), gw(groups.size(), 0.0), gt(groups.size(), 0.0);
    for (size_t i = b; i < e; ++i) {
      const StepMetrics& m = *timed[i];
      double exposed = 0;
      for (size_t k = 0; k < groups.size(); ++k) {
        const auto it = m.comm_exposed_by_group.find(groups[k]);
        const double v = it == m.comm_exposed_by_group.end() ? 0.0 : it->second;
        const auto w = m.comm_waiting_by_group.find(groups[k]);
        const auto t = m.comm_transfer_by_group.find(groups[k]);
        if (w != m.comm_waiting_by_group.end() && t != m.comm_transfer_by_group.end()) {
          const double split = std::min(v, w->second + t->second);
          const double wait = split > 0 ? split * w->second / (w->second + t->second) : 0.0;
          gw[k] += wait / double(e - b);
          gt[k] += (split - wait) / double(e - b);
          g[k] += (v - split) / double(e - b);
        } else {
          g[k] += v / double(e - b);
        }
        exposed += v;
      }
      c.push_back(std::isfinite(m.compute_s) ? m.compute_s : m.step_s - exposed);
    }
    bars.x.push_back(bucket.center);
    compute.push_back(mean_finite(c));
    for (size_t k = 0; k < groups.size(); ++k) {
      per_group[k].push_back(g[k]);
      waiting[k].push_back(gw[k]);
      transfer[k].push_back(gt[k]);
    }
  }
  if (grouped.per > 1) {
    bars.title += fmt::format(" (mean of {} steps per bar)", grouped.per);
    bars.bar_width = 0.9 * double(grouped.per);
  }
  // Legend names carry each component's share of the total time: the one number people look for.
  double total = 0;
  for (double v : compute) total += std::isfinite(v) ? v : 0;
  for (const auto* parts : {&per_group, &waiting, &transfer})
    for (const auto& g : *parts)
      for (double v : g) total += v;
  auto share = [total](const std::vector<double>& values) {
    double sum = 0;
    for (double v : values) sum += std::isfinite(v) ? v : 0;
    return total > 0 ? 100 * sum / total : 0.0;
  };
  bars.components.push_back({fmt::format("compute {:.1f}%", share(compute)), compute, palette_color(0)});
  static const std::vector<std::pair<std::string, std::string>> kNames = {{"tp", "TP comm"},
                                                                          {"ep", "EP all-to-all"},
                                                                          {"dp", "DP grad sync"},
                                                                          {"pp", "PP send/recv"},
                                                                          {"other", "other comm"}};
  for (size_t k = 0; k < groups.size(); ++k) {
    // Groups that would read "0.0%" (a one-rank run's bookkeeping messages) are invisible as bars.
    if (share(per_group[k]) + share(waiting[k]) + share(transfer[k]) < 0.05) continue;
    std::string name = groups[k] + " comm";
    for (const auto& [g, n] : kNames)
      if (g == groups[k]) name = n;
    const bool traced = share(waiting[k]) + share(transfer[k]) >= 0.05;
    if (share(per_group[k]) >= 0.05 || !traced)
      bars.components.push_back({fmt::format("exposed {}{} {:.1f}%", name, traced ? " (untraced steps)" : "",
                                             share(per_group[k])),
                                 per_group[k], traced ? "#c7c7c7" : palette_color(k + 1)});
    if (traced) {
      bars.components.push_back({fmt::format("{} waiting for last member {:.1f}%", name, share(waiting[k])),
                                 waiting[k], palette_color(k + 6)});
      bars.components.push_back({fmt::format("{} transfer {:.1f}%", name, share(transfer[k])), transfer[k],
                                 palette_color(k + 1)});
    }
  }
  return stacked_bars(bars);
}

}  // namespace moe4d
