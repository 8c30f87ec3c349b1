// comm/mpi/mpi_watchdog.h — deadlines for blocking MPI calls.
//
// A blocking MPI collective (MPI_Allreduce, ...) is the fastest way to run a small collective — the
// non-blocking forms cost 1.5-2x more latency in OpenMPI 4.1 — but a thread inside it cannot check a
// deadline. The watchdog is one thread per process that wakes every `interval` and polls its clients
// (the MpiCommunicators); a client blocked in MPI uses the poll to answer census queries for its
// group and, once its deadline has passed, to run the census and abort the job (comm/mpi/mpi_census.h).
// The blocked thread itself only publishes "blocked since t in operation X" through atomics.
//
// Thread safety: add/remove/poll are serialised by one mutex; remove() returns only when no poll of
// that client is running, so a client may be destroyed right after.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace moe4d {

class MpiWatchdog {
 public:
  class Client {
   public:
    virtual ~Client() = default;
    // Called on the watchdog thread every interval.
    virtual void watchdog_poll(std::chrono::steady_clock::time_point now) = 0;
  };

  explicit MpiWatchdog(std::chrono::milliseconds interval);
  ~MpiWatchdog();
  MpiWatchdog(const MpiWatchdog&) = delete;
  MpiWatchdog& operator=(const MpiWatchdog&) = delete;

  void add(Client* client);
  void remove(Client* client);
  // Polls every client but `self` now, on the calling thread (the watchdog thread itself included):
  // a rank that holds back its own timeout report keeps answering census queries on every group.
  void poll_others(const Client* self);

 private:
  void run();

  std::chrono::milliseconds interval_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Client*> clients_;
  bool stop_ = false;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace moe4d
