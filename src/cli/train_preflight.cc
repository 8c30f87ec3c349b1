// cli/train_preflight.cc — the checks `moe4d train` runs before allocating anything.
#include "cli/train_preflight.h"

#include <fstream>
#include <sstream>

#include "config/size_limits.h"
#include "core/error.h"
#include "data/data_check.h"
#include "parallel/layout_check.h"
#include "train/feature_gate.h"

namespace moe4d {

RankMemory this_machine_memory(int ranks_per_node, const std::string& meminfo) {
  std::ifstream in(meminfo);
  std::string line;
  double available = -1, total = -1;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    double kib = 0;
    if (!(fields >> key >> kib)) continue;
    if (key == "MemAvailable:") available = kib * 1024;
    if (key == "MemTotal:") total = kib * 1024;
  }
  if (available < 0 && total < 0) fail("cannot read the machine's memory from {} (no MemAvailable or MemTotal)", meminfo);
  const bool have_available = available >= 0;
  const double bytes = have_available ? available : total;
  const int ranks = ranks_per_node > 0 ? ranks_per_node : 1;
  return RankMemory{bytes / ranks, fmt::format("{} {:.1f} GiB / {} rank{} per node",
                                               have_available ? "MemAvailable" : "MemTotal",
                                               bytes / (1024.0 * 1024.0 * 1024.0), ranks, ranks == 1 ? "" : "s")};
}

void preflight_train(const Config& config, int world_size, const RankMemory& memory) {
  check_size_limits(config);  // first: the layout checks below multiply these sizes in int
  // The layout messages name the keys; the file is added here.
  try {
    validate_layout(config.model, config.parallel, config.train.global_batch_size, world_size);
  } catch (const Error& e) {
    fail("{}: {}", config.source, e.what());
  }
  check_training_support(config);
  check_memory_fits(config, memory);
  check_training_data(TrainingDataSpec{.source = config.source,
                                       .train = config.data.train,
                                       .valid = config.data.valid,
                                       .tokenizer = config.data.tokenizer,
                                       .model_vocab_size = config.model.vocab_size});
}

}  // namespace moe4d
