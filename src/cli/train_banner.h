// cli/train_banner.h — what rank 0 says once at the start of `moe4d train`.
//
// The lines name: the model and its parameter count (total, and active per token for MoE: routed
// experts count top_k of num_experts; plan/param_count.h); the micro-batch size and how it follows
// from train.global_batch_size; the data (files, format, tokens, documents, tokenizer); the layout
// in both readings — the articles' DP x EP x TP x PP (world = dp x ep x tp x pp) and Megatron's
// sizes (data-parallel = world / (TP x PP), EP inside it); the planner's memory estimate per rank
// (plan/memory_fit.h) against what the machine offers; and what the aux loss figure is (the sum
// over MoE layers). Plus one WARNING when token files record no tokenizer identity.
#pragma once

#include <string>
#include <vector>

#include "cli/train_preflight.h"
#include "config/config.h"

namespace moe4d {

// The lines, without the log prefix. `config` has passed preflight_train (paths absolute).
std::vector<std::string> train_start_lines(const Config& config, const TrainPreflight& preflight);

// Logs train_start_lines (info, unless `quiet`) and the unrecorded-tokenizer warning (WARNING, always).
// Rank 0 calls it.
void log_train_start(const Config& config, const TrainPreflight& preflight, bool quiet);

}  // namespace moe4d
