// report/run_pictures.h — the pictures of a run, one function each, and the helpers they share.
//
// Internal to src/report: run_report.h is the entry point that decides which pictures a run gets
// and writes them. Every picture function returns a complete SVG document, or "" when the metrics
// hold nothing to draw (a dense model has no expert load, a run without pipeline parallelism no
// timeline). Pure functions of the MetricsLog; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "report/charts.h"
#include "report/metrics_log.h"

namespace moe4d {

// Picture width shared by all files, so that they line up in a browser or a README.
inline constexpr double kPictureWidth = 820;
// Bars and heatmap columns per picture before steps are averaged (report/step_buckets.h).
inline constexpr size_t kMaxColumns = 150;

// Helpers.
double mean_finite(const std::vector<double>& values);  // NaN when none is finite
// The series of `field` over all steps; `only_present` leaves out steps without a value, so that a
// sparse measurement (val loss) is drawn as a connected line rather than isolated points.
LineSeries series_of(const MetricsLog& log, const std::string& name, double StepMetrics::*field,
                     bool only_present = false);
LineChart step_chart(std::string title, std::string y_label);  // a line chart over optimizer steps
bool has_data(const LineSeries& series);                       // any finite y

// run_pictures.cc
std::string loss_picture(const MetricsLog& log);        // loss.svg
std::string lr_picture(const MetricsLog& log);          // lr.svg
std::string throughput_picture(const MetricsLog& log);  // throughput.svg
std::string step_time_picture(const MetricsLog& log);   // step_time.svg
// moe_pictures.cc
std::vector<int> moe_layers(const MetricsLog& log);                 // layers with expert loads, sorted
std::string expert_load_picture(const MetricsLog& log, int layer);  // expert_load_layer<L>.svg
std::vector<int> replicated_layers(const MetricsLog& log);           // layers with replication records
std::string replication_picture(const MetricsLog& log, int layer);  // replication_layer<L>.svg
// health_pictures.cc
std::string memory_picture(const MetricsLog& log);      // memory.svg
std::string moe_losses_picture(const MetricsLog& log);  // moe_losses.svg
std::string comm_share_picture(const MetricsLog& log);  // comm_share.svg
// run_index.cc: one HTML page showing every picture in `pictures` with the run's numbers.
std::string run_index_html(const MetricsLog& log, const std::vector<std::pair<std::string, std::string>>& pictures);
// pipeline_pictures.cc
std::string pipeline_timeline_picture(const MetricsLog& log);  // pipeline_timeline.svg
std::string pipeline_bubble_picture(const MetricsLog& log);    // pipeline_bubble.svg

}  // namespace moe4d
