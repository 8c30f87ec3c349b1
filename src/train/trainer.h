// train/trainer.h — the training loop: micro-batches, gradient sync (train/parameter_sync.h), clipping,
// AdamW, evaluation, metrics, checkpoints and resume.
//
// One Trainer per rank, all ranks in lock-step. A step: every data replica (DP x EP) runs its
// micro_batch_num micro-batches forward and backward (gradients accumulate), the last backward
// launches the bucketed gradient reduction, then the global gradient norm is clipped and AdamW
// updates the parameters. The step objective is the mean over all micro-batches of all replicas of
// (token-mean cross-entropy + aux_loss_coeff x aux + z_loss_coeff x z) — which is why a layout with
// the same micro-batches reproduces the single-rank run.
//
// Precision (docs/precision.md): fp32 master weights, gradients and AdamW state always; with
// train.precision bf16 / fp16 the blocks' GEMMs take 16-bit operands. fp16 scales the loss
// (train/loss_scaler.h); a step with non-finite gradients or loss is skipped, and a run whose loss
// stays non-finite stops with a diagnosis of the first non-finite tensor (train/nonfinite_guard.h).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "config/config.h"
#include "data/blended_dataset.h"
#include "data/token_dataset.h"
#include "model/param_store.h"
#include "model/transformer.h"
#include "train/async_checkpoint.h"
#include "train/expert_rebalancer.h"
#include "train/fault_injector.h"
#include "train/loss_scaler.h"
#include "train/memory_report.h"
#include "train/metrics.h"
#include "train/nonfinite_guard.h"
#include "train/parameter_sync.h"
#include "train/step_executor.h"
#include "train/step_metrics.h"
#include "train/step_tracer.h"
#include "trace/run_sink.h"
#include "train/tensor_gather.h"

namespace moe4d {

class PrecisionGemm;

struct TrainerOptions {
  std::string resume_from;   // checkpoint (step dir or checkpoint root); empty: start fresh
  int exit_after = 0;        // stop after this many steps of this run (0: run to train.steps)
  bool quiet = false;        // no progress lines (tests)
  std::string metrics_path;  // overrides train.metrics_file
  // Test-only fault-injection seam (train/fault_injector.h): corrupts chosen tensors of chosen steps.
  // Borrowed; null (the default) in every production run.
  FaultInjector* fault_injector = nullptr;
  // `moe4d eval`: no training shard is opened (only data.valid is read) and no metrics file written.
  bool evaluation_only = false;
  // Set asynchronously (by a signal handler) to the number of a signal that asks the run to stop.
  // run() reads it once per step and agrees over all ranks (any rank's signal stops every rank
  // after the same step), then writes a checkpoint and returns. Borrowed; null: never stop early.
  const std::atomic<int>* stop_signal = nullptr;
  bool json_progress = false;  // progress lines as JSON objects (`train --log-format json`)
  // Facts about the run's machines (the CLI's `oversubscription`), added to the first metrics
  // record of the run; null: none.
  nlohmann::json run_facts;
  // Seconds this thread has so far spent runnable but waiting for a CPU (the OS's run-queue wait),
  // read before and after each step: time.rank_descheduled_s. Empty, or NaN: not measured.
  std::function<double()> descheduled_seconds;
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
  // Writes a checkpoint of the current state (collective; checkpoint.format full: rank 0 writes,
  // sharded: every rank writes its pieces, rank 0 commits). With checkpoint.async it first waits for
  // the save in flight, then stages the state and returns while a thread writes it: the checkpoint
  // exists once finish_checkpoint() (or run()'s step boundaries) committed it.
  void save_checkpoint();
  // Waits for the asynchronous save in flight, if any, and commits it (collective). run() calls it
  // before the next save and before it returns.
  void finish_checkpoint();

  int64_t step() const { return step_; }
  // The signal that made run() stop before its last step (0: it did not stop on a signal).
  int stopped_by_signal() const { return stopped_by_signal_; }
  // Consecutive non-finite steps at the end of run() (the same on every rank; 0: the run ended on a
  // good step). Such a run wrote no checkpoint since the streak began.
  int nonfinite_streak() const { return guard_.streak(); }
  // The step directory of the newest checkpoint this Trainer wrote (empty if none).
  const std::string& last_checkpoint() const { return last_checkpoint_; }
  // The JSONL metrics file (rank 0; empty elsewhere).
  const std::string& metrics_path() const { return metrics_.path(); }
  ParamStore& params() { return params_; }
  const ZeroLayout& zero_layout() const { return sync_->layout(); }  // ZeRO buckets and slices (every stage)
  const LossScaler& loss_scaler() const { return loss_scaler_; }
  int64_t skipped_steps() const { return guard_.skipped_steps(); }
  // The 16-bit GEMM of train.precision bf16 / fp16 (which implementation it uses); null for fp32.
  // Null too on a backend other than `cpu` (train.backend), which has no PrecisionGemm.
  const PrecisionGemm* precision_gemm() const;
  Backend& backend() { return *backend_; }  // train.backend: where every kernel of this run executes
  Transformer& model() { return *model_; }
  // Full parameter tensors gathered on rank 0 (empty elsewhere): for tests and checkpoints.
  std::map<std::string, FullTensor> gather_parameters() { return sync_->gather_parameters(); }
  // The training state as full tensors, named as in a checkpoint: `values` under the parameters'
  // global names (model.safetensors), AdamW's moments under exp_avg.<name> and exp_avg_sq.<name>
  // (optimizer.safetensors). On world rank 0 (empty maps elsewhere). Collective; between steps.
  struct FullState {
    std::map<std::string, FullTensor> values, optimizer;
  };
  FullState gather_state();
  // This rank's shards of the values and AdamW's moments cut out of full tensors named as in
  // FullState (`values(name)` and `optimizer("exp_avg." + name)` return them or throw; `origin`
  // names their source in errors). Router biases, step and loss scale are not touched. Local;
  // between steps (a checkpoint load, or a test that restarts a layout from another run's state).
  using TensorLookup = std::function<const Tensor&(const std::string& name)>;
  void load_state(const TensorLookup& values, const TensorLookup& optimizer, const std::string& origin);

 private:
  void gather_rank_hosts();  // collective
  void load_checkpoint(const std::string& path);
  // train.init_from: the weights and router biases of a checkpoint; step and optimizer stay fresh.
  void load_weights(const std::string& path);
  RankMemoryUse rank_memory() const;  // this rank's bytes (local; gather_rank_memory collects them)
  void update_router_bias(const std::vector<double>& load);
  std::vector<ChunkSpec> my_chunks() const;
  // Mixed precision and non-finite handling (trainer.cc).
  BlockNumerics step_numerics(int64_t step);
  [[noreturn]] void stop_nonfinite(int64_t step, const MicroBatchFill& fill, float grad_scale);
  nlohmann::json numerics_state() const;
  ProgressLog progress_;                           // world rank 0: the progress lines
  std::unique_ptr<StepTracer> tracer_;             // train.trace_steps
  std::vector<std::unique_ptr<RunSink>> sinks_;    // world rank 0: TensorBoard
  void restore_numerics_state(const nlohmann::json& state, const std::string& origin);

  const Config& config_;
  ParallelContext& pc_;
  TrainerOptions options_;
  ParamStore params_;
  std::unique_ptr<Transformer> model_;
  // Gradient sync and ZeRO: buckets, shards, the optimizer, the model's layer hooks
  // (train/parameter_sync.h).
  std::unique_ptr<ParameterSync> sync_;
  std::unique_ptr<StepExecutor> executor_;
  std::unique_ptr<BlendedDataset> train_data_;  // data.train: one source or a weighted blend
  std::unique_ptr<TokenSource> valid_data_;
  MetricsWriter metrics_;
  // Every world rank's host name (gathered once), written with the first step record of this run.
  std::vector<std::string> rank_hosts_;
  bool rank_hosts_written_ = false;
  // The backend every kernel of the model runs on (train.backend), and the block GEMMs' compute type
  // (train.precision).
  std::unique_ptr<Backend> backend_;
  DType compute_ = DType::kF32;
  BlockNumerics block_numerics(TensorInspector* inspector = nullptr) const {
    return {.backend = backend_.get(), .compute = compute_, .inspector = inspector};
  }
  LossScaler loss_scaler_;
  NonfiniteGuard guard_;
  std::unique_ptr<FaultInjectionHook> injection_;  // with options_.fault_injector only

  int micro_batch_size_ = 0;  // sequences per micro-batch per replica
  int64_t step_ = 0;          // optimizer steps done
  std::vector<MoeLayerStats> moe_stats_;
  std::vector<int> moe_layers_;  // global layer index of every MoE layer of the model
  int stopped_by_signal_ = 0;
  std::string last_checkpoint_;
  // Sharded saves (trainer_checkpoint.cc, train/async_checkpoint.h): the save not yet committed, the
  // background writer (declared after it: joined before rank 0's temporary directory goes), and the
  // figures of the saves committed since the last step record, for the next one ("checkpoints",
  // docs/metrics.md).
  ShardedSave sharded_save_;
  BackgroundShardWriter shard_writer_;
  nlohmann::json checkpoint_record_;
  void commit_sharded_save();  // collective
  // At a step boundary: commits the asynchronous save in flight if every rank's write has ended
  // (one all-reduce while a save is in flight; nothing otherwise), or after waiting for it with
  // `wait` (the same on every rank).
  void poll_checkpoint(bool wait);
  void record_checkpoint(int64_t step, bool async, double blocked_s, double total_s, uint64_t staging_bytes);
  std::unique_ptr<ExpertRebalancer> rebalancer_;  // expert replication (train/expert_rebalancer.h)
};

}  // namespace moe4d
