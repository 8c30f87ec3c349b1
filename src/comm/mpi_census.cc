// comm/mpi_census.cc — the missing-rank census run when a collective times out (see the header).
#include "comm/mpi_census.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace moe4d {
namespace {

constexpr int kQueryTag = 1;
constexpr int kAnswerTag = 2;

}  // namespace

MpiCensus::MpiCensus(MPI_Comm group_comm) {
  MPI_Comm_dup(group_comm, &comm_);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

MpiCensus::~MpiCensus() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiCensus::serve(int64_t issued) {
  std::lock_guard<std::mutex> lock(mutex_);
  serve_locked(issued);
}

void MpiCensus::try_serve(int64_t issued) {
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
  if (lock.owns_lock()) serve_locked(issued);
}

void MpiCensus::serve_locked(int64_t issued) {
  while (true) {
    int flag = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kQueryTag, comm_, &flag, &status);
    if (!flag) return;
    int64_t query = 0;
    MPI_Recv(&query, 1, MPI_INT64_T, status.MPI_SOURCE, kQueryTag, comm_, MPI_STATUS_IGNORE);
    // 8 bytes go eagerly on every transport, so this send never waits for the (waiting) asker.
    MPI_Send(&issued, 1, MPI_INT64_T, status.MPI_SOURCE, kAnswerTag, comm_);
  }
}

std::vector<int> MpiCensus::find_missing(int64_t seq, int64_t issued, double grace_seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  query_payload_.assign(size_, seq);
  query_requests_.assign(size_, MPI_REQUEST_NULL);
  for (int r = 0; r < size_; ++r)
    if (r != rank_) MPI_Isend(&query_payload_[r], 1, MPI_INT64_T, r, kQueryTag, comm_, &query_requests_[r]);

  std::vector<int64_t> answer(size_, -1);
  answer[rank_] = issued;
  int answered = 1;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_seconds);
  while (answered < size_ && std::chrono::steady_clock::now() < deadline) {
    serve_locked(issued);  // others may be running their own census right now
    int flag = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kAnswerTag, comm_, &flag, &status);
    if (flag) {
      int64_t value = 0;
      MPI_Recv(&value, 1, MPI_INT64_T, status.MPI_SOURCE, kAnswerTag, comm_, MPI_STATUS_IGNORE);
      if (answer[status.MPI_SOURCE] < 0) ++answered;
      answer[status.MPI_SOURCE] = value;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  // Queries to missing members never complete; the caller aborts the job, which reclaims them.
  std::vector<int> missing;
  for (int r = 0; r < size_; ++r)
    if (answer[r] < seq) missing.push_back(r);
  return missing;
}

void abort_on_collective_timeout(const char* operation, const std::string& group, const std::vector<int>& world_ranks,
                                 double waited_seconds, const std::vector<int>& missing_world) {
  std::string missing = missing_world.empty()
                            ? std::string("none (every member answered: the ranks issued different collectives or "
                                          "the transport is stuck)")
                            : fmt::format("{} (world)", fmt::join(missing_world, ","));
  std::string line = fmt::format("collective timeout: {} on group {} (world ranks {}) waited {:.1f} s; missing rank(s): {}\n",
                                 operation, group, fmt::join(world_ranks, ","), waited_seconds, missing);
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 3);
  std::abort();  // MPI_Abort does not return; this keeps [[noreturn]] honest
}

}  // namespace moe4d
