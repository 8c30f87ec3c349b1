// train/feature_gate.h — config values the schema knows but this build cannot train with yet.
//
// The config schema (docs/config.md) is complete from day one so that configs written for the full
// system parse; a value whose feature this build lacks is refused here, at start-up, with a
// clear message, instead of being accepted and silently ignored. It also refuses pipelines with fewer
// micro-batches than stages (train/pipeline_schedule.h explains why).
#pragma once

#include "config/config.h"

namespace moe4d {

// Throws moe4d::Error naming the first unsupported key and value.
void check_training_support(const Config& config);

}  // namespace moe4d
