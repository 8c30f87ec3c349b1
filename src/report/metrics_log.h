// report/metrics_log.h — reading a training run's metrics JSONL file (docs/metrics.md) back.
//
// src/train writes one JSON object per optimizer step; this is the reader `moe4d report` draws
// from. Only `step` is required: every other field may be missing (a dense model has no `moe`, old
// files have no `time`) and reads as NaN / empty, a JSON null reads as NaN (the writer turns NaN
// into null), and unknown fields are ignored so that the schema can grow. Records are returned
// sorted by step; when a step occurs twice (a run resumed without truncating its file) the later
// line wins. Malformed input throws moe4d::Error naming file:line and the offending field.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace moe4d {

// Routed tokens of one MoE layer at one step.
struct ExpertLoad {
  int layer = 0;
  std::vector<double> tokens_per_expert;
  double imbalance = 0;  // max / mean tokens per expert (from the record, or computed); NaN if no tokens
};

// Expert replication of one MoE layer at one step (`moe.replication.layers[]`).
struct ReplicaLoad {
  int layer = 0;
  double max_mean = 0, max_mean_without = 0;  // busiest EP rank's rows / mean, with and without replicas
  std::vector<std::vector<int>> placement;    // per EP rank: logical expert of each slot (homes first)
  int moved_slots = 0;
};

// One box of a pipeline schedule, in seconds since the step started.
struct PipelineEvent {
  int stage = 0;
  int micro_batch = -1;  // -1 when the event names none
  int chunk = -1;        // virtual-pipeline chunk (interleaved schedules); -1 when not given
  std::string kind;      // "forward", "backward", "send", "recv" or "idle"
  double start_s = 0, end_s = 0;
};

// Bytes one rank held at one step (`memory.per_rank[r]`).
struct RankMemoryRecord {
  double params = 0, grads = 0, optimizer = 0, activations = 0;
  double device = 0;  // the device's memory when recorded (`device_bytes`), else 0
};

// A host that ran more rank threads (ranks x BLAS threads) than the cores available to them.
struct OversubscribedHost {
  std::string host;
  int ranks = 0, threads = 0, cores = 0;
};

struct StepMetrics {
  int64_t step = 0;
  int line = 0;  // 1-based line of the record in the file (for messages)
  double loss, total_loss, val_loss, lr, grad_norm, tokens, tokens_per_s, model_tflops_per_s;
  // `time` breakdown; NaN when the record has none.
  double step_s, compute_s, comm_exposed_s;
  std::map<std::string, double> comm_exposed_by_group;  // "tp", "ep", "dp", "pp", "other", ...
  // time.rank_compute_s: every rank's compute time (its step time less its exposed communication),
  // indexed by world rank; empty when not recorded.
  std::vector<double> rank_compute_s;
  // time.rank_descheduled_s: every rank's time runnable but waiting for a CPU during the step (its
  // main thread's run-queue wait, /proc schedstat); empty when not recorded, NaN where unknown.
  std::vector<double> rank_descheduled_s;
  // oversubscription (first step of a run): hosts with more rank threads than cores; empty when none.
  std::vector<OversubscribedHost> oversubscribed;
  // rank_hosts: the host of every world rank (written with the first step of each run); empty when absent.
  std::vector<std::string> rank_hosts;
  // Traced steps: the exposed time split into waiting for the last member and transfer (rank 0).
  std::map<std::string, double> comm_waiting_by_group, comm_transfer_by_group;
  std::vector<RankMemoryRecord> memory;  // per rank; empty when not recorded
  // `moe`; absent for dense models (has_moe false, empty loads).
  bool has_moe = false;
  double aux_loss, z_loss, dropped_fraction;
  std::vector<ExpertLoad> expert_loads;
  std::vector<ReplicaLoad> replica_loads;  // `moe.replication`; empty without redundant experts
  // `pipeline` summary (pipeline-parallel runs): schedule and the idle share of the stages.
  std::string pipeline_schedule;  // "1f1b", "gpipe", "interleaved"; empty when absent
  int pipeline_stages = 0, pipeline_micro_batches = 0, pipeline_chunks = 0;  // 0 when absent
  double bubble_measured, bubble_formula;  // idle fraction measured / predicted by the schedule
  std::vector<PipelineEvent> pipeline_timeline;

  StepMetrics();
};

struct MetricsLog {
  std::string path;
  std::vector<StepMetrics> steps;  // sorted by step, unique
};

// Reads `path`. Throws moe4d::Error: missing/unreadable file, a line that is not a JSON object, a
// record without an integer `step`, a field of the wrong type, an unknown pipeline event kind, a
// MoE layer whose expert count changes between records, or a file with no records at all.
MetricsLog read_metrics_log(const std::string& path);

// One line when the run was oversubscribed (the newest run's record in `log`): where, and how much of
// the step the ranks spent waiting for a CPU; "" when not oversubscribed.
std::string oversubscription_note(const MetricsLog& log);

}  // namespace moe4d
