// cli/host_load.h — is this job oversubscribed, and how long does a rank wait for a CPU?
//
// With more rank threads on a host (ranks x BLAS threads) than cores available to them (the union
// of the ranks' sched_getaffinity masks), ranks take turns on the cores: a collective then waits
// mostly for a descheduled peer to get a CPU, and the step-time pictures would show that as
// communication. detect_oversubscription finds such hosts (collective over the world communicator);
// thread_runqueue_wait_seconds is the calling thread's time runnable but not running
// (/proc/thread-self/schedstat), which the trainer records per step. CLI layer: it reads the OS.
#pragma once

#include <nlohmann/json.hpp>

#include "comm/communicator.h"

namespace moe4d {

// {"oversubscription": {"hosts": [{"host", "ranks", "threads", "cores"}, ...]}} for the hosts with
// more rank threads than cores, or null when there is none. Every rank gets the same answer.
nlohmann::json detect_oversubscription(Communicator& world, int blas_threads);

// Seconds the calling thread has waited on a run queue since it started; NaN when the kernel does
// not say (no schedstat).
double thread_runqueue_wait_seconds();

}  // namespace moe4d
