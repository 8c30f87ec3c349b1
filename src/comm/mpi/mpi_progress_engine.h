// comm/mpi/mpi_progress_engine.h — a background thread that drives outstanding MPI requests.
//
// Why: OpenMPI's non-blocking collectives (libnbc) and its rendezvous point-to-point protocol only
// advance inside MPI calls. Without help, an all_reduce started before backward compute would sit
// idle until wait() and all of its time would be exposed. The engine tests the requests handed to
// it (MPI_Testsome) every `poll_interval` while the main thread computes, and sleeps on a condition
// variable when it holds none.
//
// Ownership: a submitted request belongs to the engine (two threads testing one MPI request is
// erroneous in MPI). A caller that wants to block on it reclaims it first: reclaim() takes it back
// at once while the engine sleeps between polls, or after the engine's current MPI_Testsome
// returns; from then on the caller owns the request again and polls it itself, so no thread
// hand-off sits on the latency path of a wait.
//
// One engine is shared by all communicators cut from the same world; it needs MPI_THREAD_MULTIPLE
// and must be destroyed before MPI_Finalize, after every submitted request was completed or
// reclaimed. Thread-safe.
#pragma once

#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace moe4d {

class MpiProgressEngine {
 public:
  using Clock = std::chrono::steady_clock;

  // State of one submitted request; fields are written by the engine under its mutex and may be
  // read by the submitter once is_done() or reclaim() has returned.
  struct Ticket {
    MPI_Request request = MPI_REQUEST_NULL;
    bool done = false;                // completed while the engine owned it
    Clock::time_point completed_at;   // when the engine observed completion
    bool reclaim_requested = false;
    bool released = false;            // the engine let go before completion; `request` is live
  };

  explicit MpiProgressEngine(std::chrono::microseconds poll_interval);
  ~MpiProgressEngine();
  MpiProgressEngine(const MpiProgressEngine&) = delete;
  MpiProgressEngine& operator=(const MpiProgressEngine&) = delete;

  // Hands `request` to the engine (starting its thread on first use).
  std::shared_ptr<Ticket> submit(MPI_Request request);
  // Non-blocking: has the ticket's request completed under the engine?
  bool is_done(const Ticket& ticket);
  // Takes the request back. On return either ticket.done (completed) or ticket.released (the
  // caller now owns ticket.request and must complete it).
  void reclaim(Ticket& ticket);

 private:
  void run();

  const std::chrono::microseconds poll_interval_;
  std::mutex mutex_;
  std::condition_variable wake_;      // engine: new work or stop
  std::condition_variable released_;  // reclaimers: the engine let go of (or completed) a ticket
  std::vector<std::shared_ptr<Ticket>> active_;  // owned by the engine; changed only under mutex_
  bool in_mpi_ = false;                          // the engine is testing active_ right now
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace moe4d
