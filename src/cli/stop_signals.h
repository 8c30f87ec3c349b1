// cli/stop_signals.h — SIGTERM / SIGINT ask a training run to stop cleanly.
//
// What Slurm, Kubernetes and Ctrl-C send: the first SIGTERM or SIGINT only sets a flag, which the
// trainer reads once per step and agrees on over all ranks (TrainerOptions::stop_signal), so every
// rank finishes the step, a checkpoint is written and the run exits 0. A second one exits at once
// (the default action of the signal). Process-wide state, so it lives in the CLI layer.
#pragma once

#include <atomic>

namespace moe4d {

// Installs the handlers (idempotent) and returns the flag they set (0, or the signal number).
const std::atomic<int>& install_stop_signal_handlers();

// "SIGTERM", "SIGINT", or "signal N".
const char* stop_signal_name(int signal);

}  // namespace moe4d
