// plan/memory_fit.h — does a training config fit this machine's memory? Asked before `train`
// allocates anything.
//
// The estimate is the planner's memory model (plan/memory_model.h) for the config's own layout:
// the peak over pipeline stages of weights, gradients, optimizer state, saved activations,
// workspace and communication buffers of one rank (no reserve: on a CPU the caller passes the memory
// that is actually free). Explicit stage_layers are modelled as an even split and device_list does
// not change the bytes of a rank. Pure and thread-safe; the caller measures the machine.
#pragma once

#include <string>

#include "config/config.h"
#include "plan/memory_model.h"

namespace moe4d {

// The peak memory of one rank of `config`'s layout. The config must have passed validate_layout.
MemoryBreakdown config_memory_per_rank(const Config& config);

// What the machine offers one rank, for the message.
struct RankMemory {
  double bytes = 0;         // usable bytes per rank
  std::string description;  // e.g. "MemAvailable 23.4 GiB / 4 ranks per node"
};

// Throws moe4d::Error with one line unless the estimate fits `available`: "<source>: the layout
// needs 84.2 GiB per rank (weights ..., activations ...), this machine has 23.4 GiB (...); try ...".
void check_memory_fits(const Config& config, const RankMemory& available);

}  // namespace moe4d
