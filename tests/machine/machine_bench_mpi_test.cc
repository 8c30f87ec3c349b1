// tests/machine/machine_bench_mpi_test.cc — a --quick machine bench over MPI (1 and 2 ranks): every
// rank gets the same cluster, it has one device per rank and (with 2 ranks) a measured table for
// every collective, the written file reads back, and `moe4d plan` accepts it for a real config.
#include <gtest/gtest.h>

#include <fstream>

#include "../common/temp_dir.h"
#include "comm/mpi/mpi_communicator.h"
#include "core/error.h"
#include "machine/machine_bench.h"
#include "plan/cluster_yaml.h"
#include "plan/planner.h"

namespace moe4d {
namespace {

TEST(MachineBenchMpi, QuickRunWritesAClusterThatPlanAccepts) {
  auto world = MpiCommunicator::world();
  const int n = world->size();
  std::vector<std::string> lines;
  MachineBenchOptions options;
  options.quick = true;
  options.progress = [&](const std::string& line) { lines.push_back(line); };
  const MachineBenchResult result = run_machine_bench(*world, options);
  const ClusterSpec& c = result.cluster;

  // Progress lines on rank 0 only.
  if (world->rank() == 0) {
    EXPECT_GE(lines.size(), 3u);
  } else {
    EXPECT_TRUE(lines.empty());
  }
  EXPECT_EQ(c.nodes, 1);
  EXPECT_EQ(c.devices_per_node, n);
  EXPECT_GT(c.peak_flops(Precision::kFP32), 1e8);
  EXPECT_FALSE(c.device.gemm_efficiency[0].empty());
  EXPECT_GT(c.device.memory_bandwidth, 1e8);
  for (int k = 0; k < kNumCollectives; ++k) {
    const auto& table = c.measured[0][k];
    ASSERT_EQ(table.size(), size_t(n - 1)) << collective_name(static_cast<Collective>(k));
    for (size_t i = 0; i < table.size(); ++i) {
      EXPECT_EQ(table[i].ranks, int(i) + 2);
      EXPECT_GE(table[i].latency, 0);
      EXPECT_GT(table[i].bus_bandwidth, 0);
    }
  }
  // Every rank holds the same cluster (the fits use the slowest rank's time of every call).
  const std::string yaml = cluster_to_yaml(c);
  const std::string first = [&] {
    double len = double(yaml.size());
    world->broadcast(&len, 1, DType::kF64, 0);
    std::string text(size_t(len), '\0');
    if (world->rank() == 0) text = yaml;
    world->broadcast(text.data(), text.size(), DType::kU8, 0);
    return text;
  }();
  EXPECT_EQ(first, yaml);

  if (world->rank() == 0) {
    test::TempDir dir("machine-bench");
    const std::string path = dir.path() + "/this_machine.yaml";
    std::ofstream(path) << yaml;
    const ClusterSpec back = load_cluster_file(path);
    EXPECT_EQ(back.devices_per_node, n);
    PlanRequest request;
    request.model = std::string(MOE4D_SOURCE_DIR) + "/configs/tiny.yaml";
    request.cluster = path;
    request.layout = n == 1 ? "dp=1" : "dp=2";
    request.json = true;
    if (n <= 2) {
      const auto doc = nlohmann::json::parse(run_plan(request));
      EXPECT_TRUE(doc["fits"].get<bool>());
      EXPECT_GT(doc["time"]["step_seconds"].get<double>(), 0);
    }
    request.layout.clear();  // a search over every layout of n devices
    EXPECT_NO_THROW(run_plan(request));
    request.precision = Precision::kBF16;
    if (back.peak_flops(Precision::kBF16) == 0) {
      EXPECT_THROW(run_plan(request), Error);
    }
  }
}

}  // namespace
}  // namespace moe4d
