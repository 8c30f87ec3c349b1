// tests/report/run_index_test.cc — the pictures added for tuning (memory per rank, MoE losses, comm
// share against the 15% guideline, waiting vs transfer in the step time) and index.html, which must
// reference every picture written and nothing else.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "../common/temp_dir.h"
#include "report/run_report.h"
#include "xml_checker.h"

namespace moe4d {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

nlohmann::json record(int step, bool traced) {
  nlohmann::json comm = {{"tp", {{"busy_s", 0.02}, {"exposed_s", 0.01}, {"bytes", 1e6}}},
                         {"dp", {{"busy_s", 0.03}, {"exposed_s", 0.005}, {"bytes", 1e6}}}};
  if (traced) {
    comm["tp"]["waiting_s"] = 0.007;
    comm["tp"]["transfer_s"] = 0.003;
    comm["dp"]["waiting_s"] = 0.001;
    comm["dp"]["transfer_s"] = 0.004;
  }
  nlohmann::json per_rank = nlohmann::json::array();
  for (int r = 0; r < 4; ++r)
    per_rank.push_back({{"params_bytes", 4e6 * (r + 1)}, {"grads_bytes", 4e6}, {"optimizer_bytes", 8e6},
                        {"activations_peak_bytes", 2e6}});
  return {{"step", step},
          {"loss", 4.0 - 0.1 * step},
          {"lr", 1e-3},
          {"grad_norm", 1.0},
          {"tokens_per_s", 1000},
          {"time", {{"step_s", 0.1}, {"compute_s", 0.085}, {"comm_exposed_s", 0.015}, {"comm", comm}}},
          {"moe",
           {{"aux_loss", 1.0 + 0.01 * step},
            {"z_loss", 2.0},
            {"dropped_fraction", 0.02},
            {"layers", {{{"layer", 1}, {"tokens_per_expert", {10, 20, 30, 40}}}}}}},
          {"memory", {{"zero_stage", 0}, {"per_rank", per_rank}}}};
}

TEST(RunIndex, ReferencesEveryPictureAndShowsTheNewOnes) {
  test::TempDir dir;
  {
    std::ofstream out(dir.file("metrics.jsonl"));
    for (int step = 1; step <= 6; ++step) out << record(step, step >= 4).dump() << "\n";
  }
  const std::vector<std::string> written = write_run_report(dir.file("metrics.jsonl"), dir.path());
  std::set<std::string> pictures;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    if (entry.path().extension() == ".svg") pictures.insert(entry.path().filename().string());
  for (const char* expected : {"memory.svg", "moe_losses.svg", "comm_share.svg", "step_time.svg", "loss.svg"})
    EXPECT_TRUE(pictures.count(expected)) << expected;

  const std::string html = read_file(dir.file("index.html"));
  ASSERT_FALSE(html.empty());
  std::set<std::string> referenced;
  const std::regex img("<img src=\"([^\"]+)\"");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), img); it != std::sregex_iterator(); ++it)
    referenced.insert((*it)[1]);
  EXPECT_EQ(referenced, pictures) << "index.html must show every picture written, and only those";
  EXPECT_NE(html.find("waiting"), std::string::npos) << "the comm numbers give the traced split";

  for (const std::string& name : pictures) test::parse_xml(read_file(dir.file(name)));  // well-formed
  const std::string share = read_file(dir.file("comm_share.svg"));
  EXPECT_NE(share.find("15% guideline"), std::string::npos);
  const std::string step_time = read_file(dir.file("step_time.svg"));
  EXPECT_NE(step_time.find("TP comm waiting for last member"), std::string::npos);
  EXPECT_NE(step_time.find("TP comm transfer"), std::string::npos);
  EXPECT_NE(step_time.find("untraced steps"), std::string::npos);
  const std::string memory = read_file(dir.file("memory.svg"));
  EXPECT_NE(memory.find("optimizer state"), std::string::npos);
  EXPECT_NE(memory.find("rank 3"), std::string::npos);
}

}  // namespace
}  // namespace moe4d
