// comm/clock_sync.h — how far each rank's clock is from world rank 0's, so that traces of all ranks
// line up on one time axis.
//
// Ping-pong with rank 0 (Cristian's algorithm): rank 0 notes t0, the rank answers with its clock
// tr, rank 0 notes t1; offset = tr - (t0 + t1) / 2, taken from the round with the shortest round
// trip (least queueing), whose error is at most half that round trip. Ranks are measured one at a
// time. On one host the clocks are the same steady clock and the estimate is ~0 within the error.
#pragma once

#include <cstdint>

#include "comm/communicator.h"

namespace moe4d {

struct ClockOffset {
  int64_t offset_ns = 0;      // this rank's clock minus rank 0's
  int64_t round_trip_ns = 0;  // of the round used (the error bound is half of it); 0 on rank 0
};

// Collective over `world`; every rank gets its own offset. rounds >= 1 ping-pongs per rank.
ClockOffset estimate_clock_offset(Communicator& world, int rounds = 16);

}  // namespace moe4d
