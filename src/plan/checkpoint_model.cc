// plan/checkpoint_model.cc — bytes, write time and blocked time of a save, and the interval's cost.
#include "plan/checkpoint_model.h"

#include <algorithm>
#include <cmath>

#include "plan/param_count.h"

namespace moe4d {

CheckpointCost checkpoint_cost(const PlanContext& ctx, const Evaluation& e) {
  const TrainingSetup& s = ctx.setup;
  CheckpointCost c;
  c.bytes = 12 * count_model_params(ctx.model).total();
  c.staging_bytes = e.memory.checkpoint_staging;
  const double storage = ctx.cluster.storage_write_bandwidth;
  if (storage > 0) {
    const bool one_writer = s.checkpoint_format == CheckpointFormat::kFull;
    const double nic = ctx.cluster.inter.nic_bandwidth;
    c.write_seconds = c.bytes / (one_writer && nic > 0 ? std::min(storage, nic) : storage);
  }
  const double between_saves = s.checkpoint_interval * e.time.step;
  if (s.checkpoint_async) {
    c.blocked_seconds = c.staging_bytes / ctx.cluster.device.memory_bandwidth;
    if (s.checkpoint_interval > 0 && !std::isnan(c.write_seconds))
      c.blocked_seconds += std::max(0.0, c.write_seconds - between_saves);
  } else {
    c.blocked_seconds = c.write_seconds;
  }
  if (between_saves > 0 && !std::isnan(c.blocked_seconds)) c.interval_share = c.blocked_seconds / between_saves;
  return c;
}

}  // namespace moe4d
