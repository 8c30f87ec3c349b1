// comm/mpi/mpi_census.cc — the missing-rank census run when a collective times out (see the header).
#include "comm/mpi/mpi_census.h"

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

void MpiCensus::serve(const CensusAnswer& mine) {
  std::lock_guard<std::mutex> lock(mutex_);
  serve_locked(mine);
}

void MpiCensus::try_serve(const CensusAnswer& mine) {
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
  if (lock.owns_lock()) serve_locked(mine);
}

void MpiCensus::serve_locked(const CensusAnswer& mine) {
  while (true) {
    int flag = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kQueryTag, comm_, &flag, &status);
    if (!flag) return;
    int64_t query = 0;
    MPI_Recv(&query, 1, MPI_INT64_T, status.MPI_SOURCE, kQueryTag, comm_, MPI_STATUS_IGNORE);
    // 128 bytes go eagerly on every transport, so this send never waits for the (waiting) asker.
    MPI_Send(&mine, sizeof(CensusAnswer), MPI_BYTE, status.MPI_SOURCE, kAnswerTag, comm_);
  }
}

std::vector<LateMember> MpiCensus::find_late(int64_t seq, const CensusAnswer& mine, double grace_seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  query_payload_.assign(size_, seq);
  query_requests_.assign(size_, MPI_REQUEST_NULL);
  for (int r = 0; r < size_; ++r)
    if (r != rank_) MPI_Isend(&query_payload_[r], 1, MPI_INT64_T, r, kQueryTag, comm_, &query_requests_[r]);

  std::vector<CensusAnswer> answer(size_);
  std::vector<bool> answered(size_, false);
  answer[rank_] = mine;
  answered[rank_] = true;
  int count = 1;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_seconds);
  while (count < size_ && std::chrono::steady_clock::now() < deadline) {
    serve_locked(mine);  // others may be running their own census right now
    int flag = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kAnswerTag, comm_, &flag, &status);
    if (flag) {
      CensusAnswer value;
      MPI_Recv(&value, sizeof(CensusAnswer), MPI_BYTE, status.MPI_SOURCE, kAnswerTag, comm_, MPI_STATUS_IGNORE);
      value.waiting_in[sizeof(value.waiting_in) - 1] = '\0';
      if (!answered[status.MPI_SOURCE]) ++count;
      answered[status.MPI_SOURCE] = true;
      answer[status.MPI_SOURCE] = value;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  // Queries to missing members never complete; the caller aborts the job, which reclaims them.
  std::vector<LateMember> late;
  for (int r = 0; r < size_; ++r)
    if (!answered[r] || answer[r].issued < seq) late.push_back(LateMember{r, answered[r], answer[r]});
  return late;
}

void abort_on_collective_timeout(const char* operation, const std::string& group, const std::vector<int>& world_ranks,
                                 double waited_seconds, const std::vector<LateMember>& late,
                                 const std::vector<std::string>& hosts) {
  auto host_of = [&](int group_rank) {
    const int world = world_ranks[group_rank];
    return world >= 0 && static_cast<size_t>(world) < hosts.size() ? hosts[world] : std::string("?");
  };
  std::vector<int> missing_world;
  std::vector<std::string> missing_where, behind;
  for (const LateMember& m : late) {
    // An answer from outside any collective cannot happen (only waiting processes answer); such a
    // member is treated as missing.
    if (m.answered && m.answer.waiting_in[0] != '\0') {
      behind.push_back(fmt::format("rank {} on {} (waiting {:.1f} s in {})", world_ranks[m.rank], host_of(m.rank),
                                   m.answer.waiting_seconds, m.answer.waiting_in));
    } else {
      missing_world.push_back(world_ranks[m.rank]);
      missing_where.push_back(fmt::format("rank {} on {}", world_ranks[m.rank], host_of(m.rank)));
    }
  }
  std::string missing;
  if (late.empty())
    missing = "none (every member answered: the ranks issued different collectives or the transport is stuck)";
  else if (missing_world.empty())
    missing = "none in this group (every late member is itself blocked in another collective)";
  else
    missing = fmt::format("{} (world) [{}: no answer (dead, stopped, or busy outside MPI)]", fmt::join(missing_world, ","),
                          fmt::join(missing_where, ", "));
  std::string line = fmt::format("collective timeout: {} on group {} (world ranks {}) waited {:.1f} s; missing rank(s): {}",
                                 operation, group, fmt::join(world_ranks, ","), waited_seconds, missing);
  if (!behind.empty()) line += fmt::format("; blocked behind them: {}", fmt::join(behind, ", "));
  line += "\n";
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 3);
  std::abort();  // MPI_Abort does not return; this keeps [[noreturn]] honest
}

}  // namespace moe4d
