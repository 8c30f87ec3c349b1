// parallel/layout_check.cc — layout validation with messages that say what to change.
#include "parallel/layout_check.h"

#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config/config.h"
#include "config/config_names.h"
#include "config/layout_rules.h"
#include "core/error.h"

namespace moe4d {
namespace {

// Divisors of `value` up to 128 (the useful parallel sizes), for suggestions.
std::string small_divisors(int64_t value) {
  std::vector<int64_t> divisors;
  for (int64_t d = 1; d <= std::min<int64_t>(value, 128); ++d)
    if (value % d == 0) divisors.push_back(d);
  return fmt::format("{}", fmt::join(divisors, ", "));
}

// The multiples of `by` around `value`, e.g. "999 or 1002".
std::string nearby_multiples(int64_t value, int64_t by) {
  int64_t lower = value / by * by;
  int64_t upper = lower + by;
  return lower > 0 ? fmt::format("{} or {}", lower, upper) : fmt::format("{}", upper);
}

void require_divisible(const char* what, int64_t value, const char* by_name, int64_t by) {
  if (value % by == 0) return;
  fail("{} {} is not divisible by {} {}; set {} to a divisor of {} ({}), or {} to a multiple of {} (e.g. {})", what,
       value, by_name, by, by_name, value, small_divisors(value), what, by, nearby_multiples(value, by));
}

void require_positive(const char* key, int64_t value) {
  if (value < 1) fail("{} is {}; it must be >= 1", key, value);
}

void check_pipeline(const ModelConfig& model, const ParallelConfig& p) {
  bool interleaved = p.pipeline_schedule == PipelineSchedule::kInterleaved;
  if (!interleaved && p.virtual_pipeline > 1)
    fail("virtual_pipeline {} is only used by pipeline_schedule interleaved; set pipeline_schedule: interleaved or "
         "virtual_pipeline: 1",
         p.virtual_pipeline);
  if (!p.stage_layers.empty()) {
    if (interleaved)
      fail("stage_layers cannot be combined with pipeline_schedule interleaved (its chunks are equal); drop "
           "stage_layers or use 1f1b");
    if (static_cast<int>(p.stage_layers.size()) != p.pipeline_parallel)
      fail("stage_layers has {} entries, but pipeline_parallel is {}; give one layer count per pipeline stage",
           p.stage_layers.size(), p.pipeline_parallel);
    for (size_t s = 0; s < p.stage_layers.size(); ++s)
      if (p.stage_layers[s] < 1)
        fail("stage_layers[{}] is {}; every pipeline stage needs at least 1 layer", s, p.stage_layers[s]);
    int total = std::accumulate(p.stage_layers.begin(), p.stage_layers.end(), 0);
    if (total != model.num_layers)
      fail("stage_layers {} sum to {}, but num_layers is {}; the stages must hold every layer exactly once",
           fmt::join(p.stage_layers, ","), total, model.num_layers);
  } else if (model.num_layers % p.pipeline_parallel != 0) {
    fail("num_layers {} is not divisible by pipeline_parallel {}; set pipeline_parallel to a divisor of {} ({}), or "
         "list the layers of each stage with stage_layers",
         model.num_layers, p.pipeline_parallel, model.num_layers, small_divisors(model.num_layers));
  }
  if (!interleaved) return;
  const InterleavedFit fit =
      interleaved_fit(model.num_layers, p.pipeline_parallel, p.virtual_pipeline, p.micro_batch_num);
  if (fit.few_stages)
    fail("pipeline_schedule interleaved needs pipeline_parallel >= 2 (got {}); use 1f1b or more stages",
         p.pipeline_parallel);
  if (fit.few_chunks)
    fail("pipeline_schedule interleaved needs virtual_pipeline >= 2 model chunks per rank (got {}); set "
         "virtual_pipeline or use 1f1b",
         p.virtual_pipeline);
  const int chunks = p.pipeline_parallel * p.virtual_pipeline;
  if (fit.layers_uneven)
    fail("num_layers {} is not divisible by pipeline_parallel {} x virtual_pipeline {} = {} (the interleaved schedule "
         "gives every chunk the same number of layers); change virtual_pipeline or num_layers",
         model.num_layers, p.pipeline_parallel, p.virtual_pipeline, chunks);
  if (fit.micro_batches_uneven)
    fail("micro_batch_num {} is not divisible by pipeline_parallel {} (required by the interleaved schedule); use a "
         "multiple of {}",
         p.micro_batch_num, p.pipeline_parallel, p.pipeline_parallel);
}

// The two grids of a stage (docs/config.md): the MoE grid dp x ep x etp, the dense grid
// tp x cp x DP_dense. Parallel folding (etp != tp) is not built yet; CP is carved out of the data
// replicas dp x ep, so it must divide them.
void check_dense_grid(const ParallelConfig& p) {
  require_positive("context_parallel", p.context_parallel);
  if (p.expert_tensor_parallel != 0 && p.expert_tensor_parallel != p.tensor_parallel)
    fail("expert_tensor_parallel {} differs from tensor_parallel {}: parallel folding (experts with their own tensor "
         "parallelism) is not supported yet; set expert_tensor_parallel: {} or leave it unset",
         p.expert_tensor_parallel, p.tensor_parallel, p.tensor_parallel);
  const int replicas = p.data_parallel * p.expert_parallel;
  if (replicas % p.context_parallel != 0)
    fail("context_parallel {} does not divide data_parallel {} x expert_parallel {} = {} (the ranks of a stage beside "
         "tensor_parallel, which context parallelism splits into DP_dense x CP); set context_parallel to a divisor of "
         "{} ({}), or data_parallel to a multiple of {}",
         p.context_parallel, p.data_parallel, p.expert_parallel, replicas, replicas, small_divisors(replicas),
         p.context_parallel / std::gcd(p.context_parallel, p.expert_parallel));
}

}  // namespace

void validate_parallel_size(const ParallelConfig& p, int world_size) {
  require_positive("data_parallel", p.data_parallel);
  require_positive("expert_parallel", p.expert_parallel);
  require_positive("tensor_parallel", p.tensor_parallel);
  require_positive("pipeline_parallel", p.pipeline_parallel);
  require_positive("micro_batch_num", p.micro_batch_num);
  require_positive("virtual_pipeline", p.virtual_pipeline);
  check_dense_grid(p);
  if (p.world_size() != world_size) {
    // MindFormers' parallel_config counts the expert-parallel ranks inside data_parallel (its world is
    // data_parallel x model_parallel x pipeline_stage); a config written with that reading is recognised
    // and the moe4d value shown, since moe4d's data_parallel counts only the replicas outside EP.
    const bool mindformers_reading = p.expert_parallel > 1 && p.data_parallel % p.expert_parallel == 0 &&
                                     p.data_parallel * p.tensor_parallel * p.pipeline_parallel == world_size;
    if (mindformers_reading)
      fail("parallel size mismatch: dp {} x ep {} x tp {} x pp {} = {}, but {} ranks were started; data_parallel {} "
           "looks like MindFormers' reading, which counts expert_parallel inside data_parallel (dp {} x tp {} x pp {} = "
           "{}); moe4d counts world = data_parallel x expert_parallel x tensor_parallel x pipeline_parallel, so set "
           "data_parallel: {} (= {} / {})",
           p.data_parallel, p.expert_parallel, p.tensor_parallel, p.pipeline_parallel, p.world_size(), world_size,
           p.data_parallel, p.data_parallel, p.tensor_parallel, p.pipeline_parallel, world_size,
           p.data_parallel / p.expert_parallel, p.data_parallel, p.expert_parallel);
    fail("parallel size mismatch: dp {} x ep {} x tp {} x pp {} = {}, but {} ranks were started", p.data_parallel,
         p.expert_parallel, p.tensor_parallel, p.pipeline_parallel, p.world_size(), world_size);
  }
  if (!p.device_list.empty()) {
    if (static_cast<int>(p.device_list.size()) != world_size)
      fail("device_list has {} entries, but {} ranks were started; list every world rank exactly once",
           p.device_list.size(), world_size);
    std::vector<bool> seen(world_size, false);
    for (size_t i = 0; i < p.device_list.size(); ++i) {
      int r = p.device_list[i];
      if (r < 0 || r >= world_size)
        fail("device_list[{}] is {}, not a world rank; expected a permutation of 0..{}", i, r, world_size - 1);
      if (seen[r]) fail("device_list names world rank {} twice; expected a permutation of 0..{}", r, world_size - 1);
      seen[r] = true;
    }
  }
}

void validate_layout(const ModelConfig& model, const ParallelConfig& p, int64_t global_batch_size, int world_size) {
  validate_parallel_size(p, world_size);

  // What each size must divide (config/layout_rules.h): TP ranks hold whole heads (query and KV,
  // model/attention_block.h) and slices of the FFNs and the vocabulary.
  const std::vector<SplitRule> rules = split_rules(model);
  for (const SplitRule& rule : rules)
    if (rule.by == SplitRule::kTensor) require_divisible(rule.key, rule.value, "tensor_parallel", p.tensor_parallel);
  // Sequence parallelism gives every TP rank an equal slice of each sequence (model/sequence_shard.h).
  if (p.sequence_parallel && model.seq_length % p.tensor_parallel != 0)
    fail("sequence_parallel needs seq_length divisible by tensor_parallel, but seq_length {} is not divisible by "
         "tensor_parallel {}; use a seq_length that is a multiple of {}, or sequence_parallel: false",
         model.seq_length, p.tensor_parallel, p.tensor_parallel);

  // Context parallelism cuts each sequence into 2 x cp causal chunks (model/context_parallel.h),
  // and under sequence parallelism each rank's cp share again into tp slices.
  if (const int cp = p.context_parallel; cp > 1) {
    const int64_t unit = 2 * int64_t{cp} * (p.sequence_parallel ? p.tensor_parallel : 1);
    if (model.seq_length % unit != 0)
      fail("context_parallel {} needs seq_length divisible by 2 x context_parallel{} = {} (the causal load-balanced "
           "chunks{}), but seq_length is {}; use seq_length {}, or another context_parallel",
           cp, p.sequence_parallel ? " x tensor_parallel" : "", unit,
           p.sequence_parallel ? ", each cut into tensor_parallel sequence-parallel slices" : "", model.seq_length,
           nearby_multiples(model.seq_length, unit));
    // Not built yet: the per-sequence and global-batch statistics over the CP group, and MLA's
    // latent attention over the gathered sequence.
    if (model.is_moe() && model.moe.load_balancing_type != LoadBalancing::kAuxLoss)
      fail("context_parallel {} supports moe.load_balancing_type aux_loss only, not {} (its statistics are not yet "
           "reduced over the context-parallel ranks); use aux_loss, or context_parallel: 1",
           cp, config_names::name_of(config_names::kLoadBalancingNames, model.moe.load_balancing_type));
    if (model.is_mla())
      fail("context_parallel {} is not supported with multi-head latent attention (model.kv_lora_rank {}) yet; use "
           "context_parallel: 1",
           cp, model.mla.kv_lora_rank);
  }

  if (p.expert_parallel > 1 && !model.is_moe())
    fail("expert_parallel {} needs a MoE model, but moe.num_experts is 0 (dense); set expert_parallel: 1 or give the "
         "model experts",
         p.expert_parallel);
  for (const SplitRule& rule : rules)
    if (rule.by == SplitRule::kExpert) require_divisible(rule.key, rule.value, "expert_parallel", p.expert_parallel);
  if (const int R = model.moe.redundant_experts; model.is_moe() && R > 0) {
    const ReplicationFit fit = replication_fit(model, p.expert_parallel, R);
    // Replicas spread a hot expert over EP ranks; with one EP rank there is nowhere to spread it.
    if (fit.needs_two_ranks)
      fail("moe.redundant_experts {} needs expert_parallel >= 2 (replicas go to other EP ranks), but expert_parallel "
           "is {}; set moe.redundant_experts: 0 or raise expert_parallel",
           R, p.expert_parallel);
    if (fit.uneven)
      fail("moe.redundant_experts {} is not divisible by expert_parallel {} (each EP rank holds redundant_experts / "
           "expert_parallel replica slots); use a multiple of {} (e.g. {})",
           R, p.expert_parallel, p.expert_parallel, nearby_multiples(R, p.expert_parallel));
    if (fit.too_many)
      fail("moe.redundant_experts {} exceeds num_experts x (expert_parallel - 1) = {} (no expert needs more copies "
           "than there are EP ranks); use at most {}",
           R, fit.most, fit.most);
  }

  // The global-batch statistics are a running sum over the step's forwards; a full recompute's second
  // forward of a micro-batch comes after later micro-batches' and could not rebuild its statistics.
  if (model.is_moe() && model.moe.load_balancing_type == LoadBalancing::kGlobalAuxLoss &&
      p.recompute == RecomputeGranularity::kFull)
    fail("moe.load_balancing_type global_aux_loss cannot be combined with recompute full (a recomputed forward "
         "cannot rebuild the step's running expert counts); use recompute selective or none, or aux_loss / "
         "seq_aux_loss");

  check_pipeline(model, p);

  require_positive("global_batch_size", global_batch_size);
  int64_t replicas_x_micro = static_cast<int64_t>(p.dense_replicas()) * p.micro_batch_num;
  if (global_batch_size < replicas_x_micro || global_batch_size % replicas_x_micro != 0) {
    const std::string cp =
        p.context_parallel > 1 ? fmt::format(" / context_parallel {}", p.context_parallel) : std::string();
    fail("global_batch_size {} is not divisible by data_parallel {} x expert_parallel {}{} x micro_batch_num {} = {} "
         "(every data replica needs whole micro-batches); use a multiple of {} (e.g. {})",
         global_batch_size, p.data_parallel, p.expert_parallel, cp, p.micro_batch_num, replicas_x_micro,
         replicas_x_micro, nearby_multiples(global_batch_size, replicas_x_micro));
  }
}

}  // namespace moe4d
