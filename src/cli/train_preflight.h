// cli/train_preflight.h — everything `moe4d train` checks before it allocates the model.
//
// preflight_train runs, in order: the config's size representability (config/size_limits.h), the
// layout against the world size (parallel/layout_check.h), the features the trainer supports
// (train/feature_gate.h), the memory fit of the layout on this machine (plan/memory_fit.h) and the
// training data and tokenizer (data/data_check.h), and that data.train, data.valid and
// data.tokenizer agree on the tokenizer (check_tokenizer_agreement). Each failure is one moe4d::Error line naming the
// key or file. Every rank runs it on the same inputs and reaches the same verdict (the machine's
// memory is the minimum over the ranks), so rank 0 alone reports it.
//
// this_machine_memory reads /proc/meminfo (MemAvailable, else MemTotal) and divides it by the ranks
// sharing the node; it is the only place the CLI reads the machine for this.
#pragma once

#include <string>

#include "config/config.h"
#include "data/data_check.h"
#include "plan/memory_fit.h"

namespace moe4d {

// Memory one rank may use: MemAvailable (or MemTotal) of /proc/meminfo / ranks_per_node. `meminfo`
// is the file to read (tests pass their own). Throws moe4d::Error if it has neither field.
RankMemory this_machine_memory(int ranks_per_node, const std::string& meminfo = "/proc/meminfo");

// What preflight learnt that the start of the run reports (cli/train_banner.h) and that a resumed
// checkpoint is checked against (cli/train_setup.h).
struct TrainPreflight {
  TokenizerAgreement tokenizer;  // the run's tokenizer and the token files that record none
  RankMemory memory;             // what this machine offers one rank (the fit was checked against it)
};

// Also makes the data paths absolute (resolve_data_paths, cli/train_setup.h).
TrainPreflight preflight_train(Config& config, int world_size, const RankMemory& memory);

}  // namespace moe4d
