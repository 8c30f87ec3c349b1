// train/async_checkpoint.cc — the background shard writer of checkpoint.async.
#include "train/async_checkpoint.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"

namespace moe4d {
namespace {
std::atomic<double> write_delay_s{0.0};
}  // namespace

void set_background_write_delay_for_tests(double seconds) { write_delay_s.store(seconds); }

BackgroundShardWriter::~BackgroundShardWriter() {
  if (thread_.joinable()) thread_.join();
}

void BackgroundShardWriter::start(const std::string& tmp_dir, int rank, std::vector<RankPiece> pieces) {
  if (in_flight()) fail("internal: a checkpoint write is still in flight (wait for it before the next save)");
  size_t total = 0;
  for (const RankPiece& p : pieces) total += size_t(p.owned.piece.end - p.owned.piece.begin);
  if (staging_.size() < total) {
    staging_.clear();
    staging_.shrink_to_fit();  // never two buffers at once
    staging_.resize(total);
  }
  float* at = staging_.data();
  for (RankPiece& p : pieces) {
    const size_t n = size_t(p.owned.piece.end - p.owned.piece.begin);
    std::copy_n(p.data, n, at);
    p.data = at;
    at += n;
  }
  finished_.store(false, std::memory_order_relaxed);
  thread_ = std::thread([this, tmp_dir, rank, pieces = std::move(pieces)]() mutable {
    const double delay = write_delay_s.load();
    if (delay > 0) std::this_thread::sleep_for(std::chrono::duration<double>(delay));
    try {
      record_ = write_rank_shard(tmp_dir, rank, std::move(pieces));  // reports its failures in record_.error
    } catch (const std::exception& e) {  // e.g. std::bad_alloc: reported the same way
      record_ = RankShardRecord{};
      record_.error = fmt::format("rank {}: {}", rank, e.what());
    }
    finished_.store(true, std::memory_order_release);
  });
}

RankShardRecord BackgroundShardWriter::wait() {
  if (!thread_.joinable()) fail("internal: no checkpoint write in flight");
  thread_.join();
  return std::move(record_);
}

}  // namespace moe4d
