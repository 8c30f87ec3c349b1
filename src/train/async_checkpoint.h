// train/async_checkpoint.h — the state of a sharded save between its start and its commit, and the
// background writer of checkpoint.async (docs/checkpoints.md, "Asynchronous save").
//
// checkpoint.async: true (sharded only; Megatron's --async-save, torchtitan's async_mode): at a save
// each rank copies the pieces it owns (train/checkpoint_shards.h) into a staging buffer in host
// memory — exactly its share of the checkpoint, 12 bytes per element it owns (the value and AdamW's
// two moments), allocated at the first save and reused — and a thread of its own streams the copy
// into its file while the step loop goes on. The thread only writes a file: it calls no collective
// (the communicator is not thread-safe). The commit — the ranks' records to rank 0, the index, the
// manifest, the rename to step_<N> and `latest` — happens on the main threads, at the first step
// boundary at which every rank's write has finished (Trainer::poll_checkpoint agrees on that with one
// all-reduce), or when the next save, a stop or the end of the run waits for it. At most one save is
// in flight.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "train/checkpoint_shards.h"

namespace moe4d {

// Writes one rank's shard on a thread of its own, from a staged copy.
class BackgroundShardWriter {
 public:
  BackgroundShardWriter() = default;
  ~BackgroundShardWriter();  // waits for a write in flight (its outcome is dropped)
  BackgroundShardWriter(const BackgroundShardWriter&) = delete;
  BackgroundShardWriter& operator=(const BackgroundShardWriter&) = delete;

  // Copies the data of `pieces` into the staging buffer (grown to their size when needed), then
  // starts writing them as write_rank_shard does. A write still in flight is a moe4d::Error.
  void start(const std::string& tmp_dir, int rank, std::vector<RankPiece> pieces);
  bool in_flight() const { return thread_.joinable(); }
  // The write has ended (wait() returns at once); false when none is in flight.
  bool finished() const { return in_flight() && finished_.load(std::memory_order_acquire); }
  // Waits for the write in flight and returns its record (errors in record.error).
  RankShardRecord wait();
  // Bytes of the staging buffer (its capacity: the largest share staged so far).
  uint64_t staging_bytes() const { return staging_.size() * sizeof(float); }

 private:
  std::vector<float> staging_;
  std::thread thread_;
  std::atomic<bool> finished_{false};
  RankShardRecord record_;
};

// A sharded save that has started and is not yet committed (Trainer, trainer_checkpoint.cc).
struct ShardedSave {
  bool pending = false;
  int64_t step = 0;
  bool async = false;
  std::chrono::steady_clock::time_point started;
  double blocked_s = 0;  // the main thread's time in this save so far
  std::unique_ptr<CheckpointWriter> writer;  // rank 0: the temporary directory, committed at the end
  std::string error;                         // rank 0: the directory or the metadata could not be written
  RankShardRecord record;                    // a synchronous save's own write
};

// Test seam: every background write first sleeps this long (0, the default, in production), so that
// a test can let training change the parameters while a save is in flight.
void set_background_write_delay_for_tests(double seconds);

}  // namespace moe4d
