// cli/stop_signals.h — SIGTERM / SIGINT / SIGUSR1 ask a training run to stop cleanly.
//
// What Slurm, Kubernetes and Ctrl-C send (SIGTERM, SIGINT), and what OpenMPI's mpirun forwards to
// every rank without ending the job (SIGUSR1; `moe4d launch` turns its own Ctrl-C into that): the
// first one only sets a flag, which the trainer reads once per step and agrees on over all ranks
// (TrainerOptions::stop_signal), so every rank finishes the step, a checkpoint is written and the run
// exits 0 after rank 0 says "stopped by ...". A second one exits at once (the default action of the
// signal). Process-wide state, so it lives in the CLI layer.
#pragma once

#include <atomic>

namespace moe4d {

// Installs the handlers (idempotent) and returns the flag they set (0, or the signal number).
// `announce`: the handler writes "stop requested ..." at once. Only a run of one process should:
// with several ranks a signal may also be mpirun tearing the job down after another rank failed,
// which is no stop, and rank 0 reports a real stop once it has happened.
const std::atomic<int>& install_stop_signal_handlers(bool announce);

// "SIGTERM", "SIGINT", "SIGUSR1", or "a signal".
const char* stop_signal_name(int signal);

}  // namespace moe4d
