// trace/run_sink.h — the seam through which the training loop hands its per-step metrics to
// observers that are not the JSONL file (TensorBoard today). The trainer owns a list of sinks and
// calls them on world rank 0 with the record it writes to metrics.jsonl, so every observer sees
// exactly the same numbers.
#pragma once

#include <nlohmann/json.hpp>

namespace moe4d {

class RunSink {
 public:
  virtual ~RunSink() = default;
  // One step's metrics record (the metrics.jsonl line, including val_loss on evaluation steps).
  virtual void on_step(const nlohmann::json& record) = 0;
};

}  // namespace moe4d
