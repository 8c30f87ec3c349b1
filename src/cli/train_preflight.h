// cli/train_preflight.h — everything `moe4d train` checks before it allocates the model.
//
// preflight_train runs, in order: the config's size representability (config/size_limits.h), the
// layout against the world size (parallel/layout_check.h), the features the trainer supports
// (train/feature_gate.h), the memory fit of the layout on this machine (plan/memory_fit.h) and the
// training data and tokenizer (data/data_check.h). Each failure is one moe4d::Error line naming the
// key or file. Every rank runs it on the same inputs and reaches the same verdict (the machine's
// memory is the minimum over the ranks), so rank 0 alone reports it.
//
// this_machine_memory reads /proc/meminfo (MemAvailable, else MemTotal) and divides it by the ranks
// sharing the node; it is the only place the CLI reads the machine for this.
#pragma once

#include <string>

#include "config/config.h"
#include "plan/memory_fit.h"

namespace moe4d {

// Memory one rank may use: MemAvailable (or MemTotal) of /proc/meminfo / ranks_per_node. `meminfo`
// is the file to read (tests pass their own). Throws moe4d::Error if it has neither field.
RankMemory this_machine_memory(int ranks_per_node, const std::string& meminfo = "/proc/meminfo");

void preflight_train(const Config& config, int world_size, const RankMemory& memory);

}  // namespace moe4d
