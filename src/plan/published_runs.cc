// plan/published_runs.cc — the validation runs and their predictions (plan/published_runs.h).
#include "plan/published_runs.h"

#include <cmath>
#include <limits>

#include "core/error.h"
#include "plan/cluster_presets.h"

namespace moe4d {
namespace {

constexpr const char* kNarayanan2021 =
    "Narayanan et al. 2021, Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM "
    "(SC21, arXiv:2104.04473), Table 1";

// The paper's FLOP count per iteration with full activation recomputation (its eq. 3):
// 96 B s l h^2 (1 + s / (6 h) + V / (16 l h)).
double narayanan_flops(int64_t batch, int seq, int layers, int hidden, int vocab) {
  const double b = batch, s = seq, l = layers, h = hidden, v = vocab;
  return 96 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h));
}

PublishedRun gpt(const char* name, int heads, int hidden, int layers, int tp, int pp, int gpus, int64_t batch,
                 double tflops) {
  PublishedRun r;
  r.name = name;
  r.source = kNarayanan2021;
  r.cluster = "dgx-a100";
  r.hidden = hidden;
  r.heads = heads;
  r.layers = layers;
  r.vocab = 51200;
  r.seq = 2048;
  r.tp = tp;
  r.pp = pp;
  r.devices = gpus;
  r.global_batch = batch;
  r.full_recompute = true;
  r.legacy_megatron = true;
  r.tflops_per_device = tflops;
  r.flops_per_step = narayanan_flops(batch, r.seq, layers, hidden, r.vocab);
  return r;
}

}  // namespace

std::vector<PublishedRun> published_runs() {
  // Table 1 of the paper: GPT models on Selene (DGX A100 80GB, 8 per node, 8 HDR InfiniBand per node),
  // sequence 2048, vocabulary 51200, mixed precision, full activation recomputation.
  return {
      gpt("gpt-1.7b", 24, 2304, 24, 1, 1, 32, 512, 137),
      gpt("gpt-3.6b", 32, 3072, 30, 2, 1, 64, 512, 138),
      gpt("gpt-7.5b", 32, 4096, 36, 4, 1, 128, 512, 142),
      gpt("gpt-18.4b", 48, 6144, 40, 8, 1, 256, 1024, 135),
      gpt("gpt-39.1b", 64, 8192, 48, 8, 2, 512, 1536, 138),
      gpt("gpt-76.1b", 80, 10240, 60, 8, 4, 1024, 1792, 140),
      gpt("gpt-145.6b", 96, 12288, 80, 8, 8, 1536, 2304, 148),
      gpt("gpt-310.1b", 128, 16384, 96, 8, 16, 1920, 2160, 155),
      gpt("gpt-529.6b", 128, 20480, 105, 8, 35, 2520, 2520, 163),
      gpt("gpt-1008b", 160, 25600, 128, 8, 64, 3072, 3072, 163),
  };
}

PlanContext run_context(const PublishedRun& run) {
  PlanContext ctx;
  ctx.model_name = run.name;
  ModelConfig& m = ctx.model;
  m.vocab_size = run.vocab;
  m.hidden_size = run.hidden;
  m.num_layers = run.layers;
  m.num_heads = run.heads;
  m.seq_length = run.seq;
  m.tie_embeddings = true;  // GPT ties the output layer to the embedding
  // The GPT MLP (two GEMMs of width 4h, GeLU) as moe4d's SwiGLU (three GEMMs of width f): f = 8h/3 keeps
  // its FLOPs and weights; rounded to a multiple of 64 x TP so that TP divides it.
  const int unit = 64 * run.tp;
  m.ffn_hidden_size = static_cast<int>(std::lround(8.0 * run.hidden / 3 / unit)) * unit;
  ctx.setup.global_batch = run.global_batch;
  ctx.setup.seq_length = run.seq;
  ctx.setup.precision = Precision::kBF16;
  ctx.cluster = cluster_with_devices(cluster_preset(run.cluster), run.devices);
  // How Megatron-LM ran in 2021 (before flash attention, Dao et al. 2022): core attention as batched
  // GEMMs over the whole S x S square with the probabilities stored (FusedScaleMaskSoftmax), attention
  // and hidden dropout 0.1 (GPT-3's recipe, Megatron's default), the data-parallel gradient all-reduce
  // after the last micro-batch's backward (its local DDP; overlapping it came in 2023), and fp16 mixed
  // precision whose gradients are all-reduced in fp16 (Megatron accumulates and reduces them in fp32
  // only with --accumulate-allreduce-grads-in-fp32, which it forces for bf16 alone).
  if (run.legacy_megatron) {
    ctx.cluster.device.fused_attention = false;
    ctx.cluster.device.square_attention = true;
    ctx.setup.dropout = true;
    ctx.setup.overlap_grad_reduce = false;
    ctx.setup.precision = Precision::kFP16;
    ctx.setup.grad_compression = GradCompression::kFP16;
  }
  return ctx;
}

ValidationRow validate_run(const PublishedRun& run) {
  const PlanContext ctx = run_context(run);
  const int dp = run.devices / (run.tp * run.pp);
  ValidationRow row;
  row.run = run;
  row.published_step = run.flops_per_step / (run.tflops_per_device * 1e12 * run.devices);
  row.predicted_step = std::numeric_limits<double>::infinity();
  LayoutEvaluator evaluator(ctx);
  const int64_t per_replica = run.global_batch / dp;
  for (int mbs = 1; mbs <= 16 && mbs <= per_replica; ++mbs) {
    if (per_replica % mbs != 0) continue;
    for (const PipelineSchedule schedule : {PipelineSchedule::k1F1B, PipelineSchedule::kInterleaved})
      for (int v : schedule == PipelineSchedule::kInterleaved ? std::vector<int>{2, 4} : std::vector<int>{1}) {
        Layout l;
        l.dp = dp;
        l.tp = run.tp;
        l.pp = run.pp;
        l.micro_batch_size = mbs;
        l.micro_batch_num = static_cast<int>(per_replica / mbs);
        l.schedule = schedule;
        l.virtual_stages = v;
        l.recompute = run.full_recompute ? RecomputeGranularity::kFull : RecomputeGranularity::kNone;
        if (!layout_problem(ctx, l).empty()) continue;
        const Evaluation e = evaluator.evaluate(l);
        if (e.time.step < row.predicted_step) {
          row.predicted_step = e.time.step;
          row.layout = l;
          row.memory_bytes = e.memory.total();
          row.fits = e.fits;
        }
      }
  }
  if (!std::isfinite(row.predicted_step)) fail("validation run {}: no valid micro-batching of its layout", run.name);
  return row;
}

}  // namespace moe4d
