#include "comm/mpi/mpi_watchdog.h"

#include <algorithm>

namespace moe4d {

MpiWatchdog::MpiWatchdog(std::chrono::milliseconds interval) : interval_(interval), thread_([this] { run(); }) {}

MpiWatchdog::~MpiWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void MpiWatchdog::add(Client* client) {
  std::lock_guard<std::mutex> lock(mutex_);
  clients_.push_back(client);
}

void MpiWatchdog::remove(Client* client) {
  std::lock_guard<std::mutex> lock(mutex_);
  clients_.erase(std::remove(clients_.begin(), clients_.end(), client), clients_.end());
}

void MpiWatchdog::poll_others(const Client* self) {
  const auto now = std::chrono::steady_clock::now();
  auto poll = [&] {
    for (Client* client : clients_)
      if (client != self) client->watchdog_poll(now);
  };
  // On the watchdog thread the mutex is already held by run(), which is what called us.
  if (std::this_thread::get_id() == thread_.get_id()) return poll();
  std::lock_guard<std::mutex> lock(mutex_);
  poll();
}

void MpiWatchdog::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    wake_.wait_for(lock, interval_, [this] { return stop_; });
    if (stop_) break;
    const auto now = std::chrono::steady_clock::now();
    for (Client* client : clients_) client->watchdog_poll(now);
  }
}

}  // namespace moe4d
