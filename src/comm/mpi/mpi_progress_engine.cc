// comm/mpi/mpi_progress_engine.cc — the progress thread (see the header for why it exists).
#include "comm/mpi/mpi_progress_engine.h"

namespace moe4d {

MpiProgressEngine::MpiProgressEngine(std::chrono::microseconds poll_interval) : poll_interval_(poll_interval) {}

MpiProgressEngine::~MpiProgressEngine() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<MpiProgressEngine::Ticket> MpiProgressEngine::submit(MPI_Request request) {
  auto ticket = std::make_shared<Ticket>();
  ticket->request = request;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    active_.push_back(ticket);
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  wake_.notify_one();
  return ticket;
}

bool MpiProgressEngine::is_done(const Ticket& ticket) {
  std::lock_guard<std::mutex> lock(mutex_);
  return ticket.done;
}

void MpiProgressEngine::reclaim(Ticket& ticket) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (ticket.done || ticket.released) return;
  if (!in_mpi_) {
    // The engine is between polls and cannot be touching the request: take it back directly.
    std::erase_if(active_, [&](const std::shared_ptr<Ticket>& t) { return t.get() == &ticket; });
    ticket.released = true;
    return;
  }
  ticket.reclaim_requested = true;
  released_.wait(lock, [&] { return ticket.done || ticket.released; });
}

void MpiProgressEngine::run() {
  std::vector<std::shared_ptr<Ticket>> polled;
  std::vector<MPI_Request> requests;
  std::vector<int> indices;
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return stop_ || !active_.empty(); });
    if (stop_) return;
    polled = active_;
    requests.resize(polled.size());
    for (size_t i = 0; i < polled.size(); ++i) requests[i] = polled[i]->request;
    indices.resize(polled.size());
    in_mpi_ = true;
    lock.unlock();

    // MPI runs outside the mutex: a completion may copy or reduce megabytes, and submitters must
    // not block on that.
    int completed = 0;
    MPI_Testsome(static_cast<int>(requests.size()), requests.data(), &completed, indices.data(), MPI_STATUSES_IGNORE);
    auto now = Clock::now();

    lock.lock();
    in_mpi_ = false;
    if (completed != MPI_UNDEFINED) {
      for (int k = 0; k < completed; ++k) {
        Ticket& ticket = *polled[indices[k]];
        ticket.request = MPI_REQUEST_NULL;
        ticket.done = true;
        ticket.completed_at = now;
      }
    }
    // Hand back what was reclaimed during the test; from here on this thread no longer touches it.
    for (auto& ticket : active_)
      if (ticket->reclaim_requested && !ticket->done) ticket->released = true;
    std::erase_if(active_, [](const std::shared_ptr<Ticket>& t) { return t->done || t->released; });
    released_.notify_all();
    polled.clear();
    if (!active_.empty()) wake_.wait_for(lock, poll_interval_, [&] { return stop_; });
  }
}

}  // namespace moe4d
