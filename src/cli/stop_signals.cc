// cli/stop_signals.cc — the flag-setting SIGTERM / SIGINT handlers (see the header).
#include "cli/stop_signals.h"

#include <signal.h>
#include <unistd.h>

#include <cstring>

namespace moe4d {
namespace {

std::atomic<int> g_stop_signal{0};
std::atomic<bool> g_announce{false};
static_assert(std::atomic<int>::is_always_lock_free, "the stop flag is written from a signal handler");

void on_stop_signal(int signal) {
  int expected = 0;
  if (g_stop_signal.compare_exchange_strong(expected, signal)) {
    if (!g_announce.load()) return;
    static const char kNote[] =
        "moe4d: stop requested: finishing this step and writing a checkpoint (send the signal again to exit at "
        "once)\n";
    const ssize_t ignored = ::write(STDERR_FILENO, kNote, sizeof(kNote) - 1);
    (void)ignored;
    return;
  }
  // The second request: the signal's default action, now.
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  sigaction(signal, &action, nullptr);
  ::raise(signal);
}

}  // namespace

const std::atomic<int>& install_stop_signal_handlers(bool announce) {
  g_announce.store(announce);
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // blocking calls (MPI's poll, file writes) carry on after the flag is set
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGUSR1, &action, nullptr);
  return g_stop_signal;
}

const char* stop_signal_name(int signal) {
  switch (signal) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    default: return "a signal";
  }
}

}  // namespace moe4d
