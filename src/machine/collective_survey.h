// machine/collective_survey.h — latency and bus bandwidth of each collective over the moe4d
// Communicator, for every group size 2..world size, fitted to the planner's alpha-beta form (one
// line per size regime: machine/alpha_beta_fit.h).
//
// For group size n the first n world ranks form a group (world.split); the others wait. Each
// collective — all_reduce, reduce_scatter, all_gather, all_to_all_v (equal blocks) and send/recv (a
// ring shift: every member sends to the next and receives from the previous at once, as pipeline
// stages do) — is timed at message sizes min_bytes, min_bytes * step, ... max_bytes, in fp32, with
// the Communicator's default options (so the progress thread and the tuned all-reduce algorithm
// that training uses are in the numbers). One timed call: all ranks leave a world barrier, run the
// call, and the slowest member's time counts (MPI semantics: the call is done when all are). The
// size's time is the lower quartile over iterations (enough for ~target_seconds, within [min_iters,
// max_iters]); min and max are kept as the spread. "bytes" follows plan/cluster_spec.h: the full
// buffer (reduce-scatter: the unsharded input; all-gather: the gathered output; all-to-all: one
// rank's send buffer; send/recv: one message).
//
// Collective over `world`: every rank calls it with the same options and gets the same result.
#pragma once

#include <cstddef>
#include <vector>

#include "comm/communicator.h"
#include "machine/alpha_beta_fit.h"
#include "machine/gemm_survey.h"

namespace moe4d {

struct CollectiveSurveyOptions {
  size_t min_bytes = size_t{1} << 10;
  size_t max_bytes = size_t{64} << 20;
  int size_step = 2;             // geometric step between message sizes (x2: 17 sizes, enough to place regimes)
  double target_seconds = 0.15;  // timed per message size
  int min_iters = 5;
  int max_iters = 200;
};

struct CollectiveCurve {
  Collective collective = Collective::kAllReduce;
  int ranks = 0;
  std::vector<TimingSample> samples;  // lower-quartile seconds per message size
  std::vector<double> min_seconds;    // per message size: fastest iteration
  std::vector<double> max_seconds;    // per message size: slowest iteration
  PiecewiseAlphaBeta fit;  // size regimes (machine/alpha_beta_fit.h)
};

// The message sizes the options describe (bytes).
std::vector<size_t> survey_message_sizes(const CollectiveSurveyOptions& options);

// Every collective for every group size 2..world.size(); empty for one rank.
std::vector<CollectiveCurve> survey_collectives(Communicator& world, const CollectiveSurveyOptions& options,
                                                const ProgressFn& progress);

}  // namespace moe4d
