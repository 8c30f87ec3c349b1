// train/trainer.h — the training loop: micro-batches, gradient sync, clipping, AdamW, evaluation,
// metrics, checkpoints and resume.
//
// One Trainer per rank, all ranks in lock-step. A step: every data replica (DP x EP) runs its
// micro_batch_num micro-batches forward and backward (gradients accumulate), the last backward
// launches the bucketed gradient reduction, then the global gradient norm is clipped and AdamW
// updates the parameters. The step objective is the mean over all micro-batches of all replicas of
// (token-mean cross-entropy + aux_loss_coeff x aux + z_loss_coeff x z) — which is why a layout with
// the same micro-batches reproduces the single-rank run.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "data/token_dataset.h"
#include "model/param_store.h"
#include "model/transformer.h"
#include "train/grad_sync.h"
#include "train/metrics.h"
#include "train/optimizer.h"
#include "train/step_executor.h"
#include "train/tensor_gather.h"

namespace moe4d {

struct TrainerOptions {
  std::string resume_from;   // checkpoint (step dir or checkpoint root); empty: start fresh
  int exit_after = 0;        // stop after this many steps of this run (0: run to train.steps)
  bool quiet = false;        // no progress lines (tests)
  std::string metrics_path;  // overrides train.metrics_file
};

struct StepResult {
  int64_t step = 0;
  double loss = 0;       // mean cross-entropy over the step's tokens
  double aux_loss = 0;   // sum over MoE layers of the micro-batch-mean aux loss (unscaled)
  double z_loss = 0;
  double total_loss = 0; // the objective: loss + aux_coeff * aux + z_coeff * z
  double grad_norm = 0;  // before clipping
  double lr = 0;
  double seconds = 0;
  nlohmann::json record; // everything written to the metrics file
};

class Trainer {
 public:
  Trainer(const Config& config, ParallelContext& pc, TrainerOptions options = {});
  ~Trainer();

  // Runs from the current step to train.steps (or options.exit_after more steps).
  void run();
  // One optimizer step (the next one).
  StepResult train_step();
  // Mean validation cross-entropy over train.eval_batches global batches of fixed windows.
  double evaluate();
  // Writes a checkpoint of the current state (collective; rank 0 writes).
  void save_checkpoint();

  int64_t step() const { return step_; }
  // The JSONL metrics file (rank 0; empty elsewhere).
  const std::string& metrics_path() const { return metrics_.path(); }
  ParamStore& params() { return params_; }
  Transformer& model() { return *model_; }
  // Full parameter tensors gathered on rank 0 (empty elsewhere): for tests and checkpoints.
  std::map<std::string, FullTensor> gather_parameters();

 private:
  void load_checkpoint(const std::string& path);
  double clip_gradients();
  nlohmann::json memory_record();
  void update_router_bias(const std::vector<double>& load);
  nlohmann::json step_record(const StepResult& r, const std::vector<double>& load, double dropped,
                             double routed, double step_seconds);
  std::vector<ChunkSpec> my_chunks() const;

  const Config& config_;
  ParallelContext& pc_;
  TrainerOptions options_;
  ParamStore params_;
  std::unique_ptr<Transformer> model_;
  std::unique_ptr<AdamW> optimizer_;
  std::unique_ptr<GradSync> grad_sync_;
  std::unique_ptr<StepExecutor> executor_;
  std::unique_ptr<TokenDataset> train_data_;
  std::unique_ptr<TokenDataset> valid_data_;
  MetricsWriter metrics_;

  int micro_batch_size_ = 0;  // sequences per micro-batch per replica
  int64_t step_ = 0;          // optimizer steps done
  std::vector<MoeLayerStats> moe_stats_;
  std::vector<int> moe_layers_;  // global layer index of every MoE layer of the model
};

}  // namespace moe4d
