// trace/tensorboard_sink.h — TensorBoard scalars of every step (train.tensorboard_dir).
//
// Tags are paths into the metrics record, so a scalar can always be found in metrics.jsonl:
//   loss, total_loss, val_loss, lr, grad_norm, loss_scale, tokens_per_s, model_tflops_per_s, mfu,
//   time/step_s, comm/<group>/share (exposed seconds / step seconds; waiting_share, transfer_share on
//   traced steps), moe/aux_loss, moe/z_loss, moe/dropped_fraction, moe/imbalance_max (max over
//   layers of max/mean expert load), moe/layer<l>/imbalance, memory/rank<r>/<field>_bytes.
// Only keys present in the record are written (val_loss on evaluation steps, moe/* for MoE models).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "trace/event_file_writer.h"
#include "trace/run_sink.h"

namespace moe4d {

// The (tag, value) pairs of one record, in a fixed order.
std::vector<std::pair<std::string, float>> tensorboard_scalars(const nlohmann::json& record);

class TensorBoardSink final : public RunSink {
 public:
  explicit TensorBoardSink(const std::string& dir) : writer_(dir) {}
  void on_step(const nlohmann::json& record) override;
  const std::string& path() const { return writer_.path(); }

 private:
  EventFileWriter writer_;
};

}  // namespace moe4d
