// tests/parallel/layout_check_test.cc — every layout validation message, and that good layouts pass.
#include "parallel/layout_check.h"

#include <gtest/gtest.h>

#include "config/config.h"
#include "core/error.h"

namespace moe4d {
namespace {

ModelConfig moe_model() {
  ModelConfig m;
  m.vocab_size = 512;
  m.hidden_size = 64;
  m.num_layers = 4;
  m.num_heads = 8;
  m.ffn_hidden_size = 128;
  m.seq_length = 32;
  m.moe.num_experts = 8;
  return m;
}

ParallelConfig layout(int dp, int ep, int tp, int pp, int micro = 1) {
  ParallelConfig p;
  p.data_parallel = dp;
  p.expert_parallel = ep;
  p.tensor_parallel = tp;
  p.pipeline_parallel = pp;
  p.micro_batch_num = micro;
  return p;
}

std::string error_of(const ModelConfig& m, const ParallelConfig& p, int64_t batch, int world) {
  try {
    validate_layout(m, p, batch, world);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

TEST(LayoutCheck, AcceptsValidLayouts) {
  ModelConfig m = moe_model();
  EXPECT_NO_THROW(validate_layout(m, layout(2, 2, 2, 2, 2), 16, 16));
  EXPECT_NO_THROW(validate_layout(m, layout(1, 8, 8, 1), 8, 64));
  ParallelConfig staged = layout(1, 1, 1, 3);
  staged.stage_layers = {1, 2, 1};
  EXPECT_NO_THROW(validate_layout(m, staged, 4, 3));
  ParallelConfig interleaved = layout(1, 1, 1, 2, 4);
  interleaved.pipeline_schedule = PipelineSchedule::kInterleaved;
  interleaved.virtual_pipeline = 2;
  EXPECT_NO_THROW(validate_layout(m, interleaved, 8, 2));
}

TEST(LayoutCheck, SizeMismatchMessageIsExact) {
  EXPECT_EQ(error_of(moe_model(), layout(4, 1, 4, 3), 12, 64),
            "parallel size mismatch: dp 4 x ep 1 x tp 4 x pp 3 = 48, but 64 ranks were started");
  EXPECT_EQ(error_of(moe_model(), layout(0, 1, 1, 1), 1, 1), "data_parallel is 0; it must be >= 1");
}

// MindFormers' parallel_config counts EP inside data_parallel (mindformers/modules/transformer/moe.py
// _check_moe_config: data_parallel x context_parallel must be a multiple of expert_parallel; configs/README.md:
// device_num = data_parallel x model_parallel x context_parallel x pipeline_stage). A config written that way
// is named as such, with the moe4d value; a mismatch that is not that reading keeps the plain message.
TEST(LayoutCheck, SizeMismatchRecognisesMindFormersDataParallel) {
  // 16 ranks: MindFormers dp 8 (= moe4d dp 2 x ep 4) x tp 2 x pp 1.
  EXPECT_EQ(error_of(moe_model(), layout(8, 4, 2, 1), 16, 16),
            "parallel size mismatch: dp 8 x ep 4 x tp 2 x pp 1 = 64, but 16 ranks were started; data_parallel 8 "
            "looks like MindFormers' reading, which counts expert_parallel inside data_parallel (dp 8 x tp 2 x pp 1 = "
            "16); moe4d counts world = data_parallel x expert_parallel x tensor_parallel x pipeline_parallel, so set "
            "data_parallel: 2 (= 8 / 4)");
  // The suggested value is accepted.
  EXPECT_NO_THROW(validate_layout(moe_model(), layout(2, 4, 2, 1), 16, 16));
  // EP not dividing data_parallel, or dp x tp x pp != world: not that reading, the plain message.
  EXPECT_EQ(error_of(moe_model(), layout(6, 4, 2, 1), 12, 12),
            "parallel size mismatch: dp 6 x ep 4 x tp 2 x pp 1 = 48, but 12 ranks were started");
  EXPECT_EQ(error_of(moe_model(), layout(8, 4, 2, 1), 16, 32),
            "parallel size mismatch: dp 8 x ep 4 x tp 2 x pp 1 = 64, but 32 ranks were started");
}

TEST(LayoutCheck, TensorParallelDivisibility) {
  ModelConfig m = moe_model();
  std::string heads = error_of(m, layout(1, 1, 3, 1), 3, 3);
  EXPECT_TRUE(starts_with(heads, "num_heads 8 is not divisible by tensor_parallel 3; set tensor_parallel to a divisor "
                                 "of 8 (1, 2, 4, 8)"))
      << heads;
  m.num_heads = 12;
  m.ffn_hidden_size = 100;
  std::string ffn = error_of(m, layout(1, 1, 3, 1), 3, 3);
  EXPECT_TRUE(starts_with(ffn, "ffn_hidden_size 100 is not divisible by tensor_parallel 3")) << ffn;
  EXPECT_NE(ffn.find("(e.g. 99 or 102)"), std::string::npos) << ffn;
  m.ffn_hidden_size = 96;
  m.vocab_size = 1000;
  std::string vocab = error_of(m, layout(1, 1, 3, 1), 3, 3);
  EXPECT_TRUE(starts_with(vocab, "vocab_size 1000 is not divisible by tensor_parallel 3")) << vocab;
}

// Sequence parallelism gives every TP rank an equal slice of each sequence.
TEST(LayoutCheck, SequenceParallelNeedsSeqLengthDivisibleByTensorParallel) {
  ModelConfig m = moe_model();
  m.seq_length = 30;
  ParallelConfig p = layout(1, 1, 4, 1);
  EXPECT_EQ(error_of(m, p, 4, 4), "(no error)");  // without sequence parallelism the sequence is not split
  p.sequence_parallel = true;
  EXPECT_EQ(error_of(m, p, 4, 4),
            "sequence_parallel needs seq_length divisible by tensor_parallel, but seq_length 30 is not divisible by "
            "tensor_parallel 4; use a seq_length that is a multiple of 4, or sequence_parallel: false");
  m.seq_length = 32;
  EXPECT_EQ(error_of(m, p, 4, 4), "(no error)");
}

// Grouped-query attention puts whole KV heads on each TP rank; routed and shared expert widths are
// split like the dense FFN.
TEST(LayoutCheck, ModelOptionDivisibility) {
  ModelConfig m = moe_model();
  m.num_kv_heads = 2;
  std::string kv = error_of(m, layout(1, 1, 4, 1), 4, 4);
  EXPECT_TRUE(starts_with(kv, "num_kv_heads 2 is not divisible by tensor_parallel 4; set tensor_parallel to a divisor "
                              "of 2 (1, 2)"))
      << kv;
  EXPECT_EQ(error_of(m, layout(1, 1, 2, 1), 2, 2), "(no error)");
  m.num_kv_heads = 0;  // = num_heads
  m.moe.expert_ffn_hidden_size = 36;
  std::string expert = error_of(m, layout(1, 1, 8, 1), 8, 8);
  EXPECT_TRUE(starts_with(expert, "moe.expert_ffn_hidden_size 36 is not divisible by tensor_parallel 8")) << expert;
  m.moe.expert_ffn_hidden_size = 32;
  m.moe.shared_experts = 3;
  m.moe.shared_expert_ffn_hidden_size = 12;
  std::string shared = error_of(m, layout(1, 1, 8, 1), 8, 8);
  EXPECT_TRUE(starts_with(shared, "moe.shared_experts x moe.shared_expert_ffn_hidden_size 36 is not divisible by "
                                  "tensor_parallel 8"))
      << shared;
  m.moe.shared_expert_ffn_hidden_size = 8;
  EXPECT_EQ(error_of(m, layout(1, 1, 8, 1), 8, 8), "(no error)");
}

TEST(LayoutCheck, ExpertParallel) {
  ModelConfig dense = moe_model();
  dense.moe.num_experts = 0;
  std::string needs_moe = error_of(dense, layout(1, 2, 1, 1), 2, 2);
  EXPECT_TRUE(starts_with(needs_moe, "expert_parallel 2 needs a MoE model, but moe.num_experts is 0")) << needs_moe;
  ModelConfig m = moe_model();
  m.moe.num_experts = 6;
  std::string experts = error_of(m, layout(1, 4, 1, 1), 4, 4);
  EXPECT_TRUE(starts_with(experts, "num_experts 6 is not divisible by expert_parallel 4")) << experts;
}

// The global-batch balance statistics are a running sum that a full recompute's second forward could
// not rebuild: refused with one line; selective recompute and the other statistics are fine.
TEST(LayoutCheck, GlobalBalanceLossRefusesFullRecompute) {
  ModelConfig m = moe_model();
  m.moe.load_balancing_type = LoadBalancing::kGlobalAuxLoss;
  ParallelConfig p = layout(2, 1, 1, 1);
  EXPECT_EQ(error_of(m, p, 2, 2), "(no error)");
  p.recompute = RecomputeGranularity::kSelective;
  EXPECT_EQ(error_of(m, p, 2, 2), "(no error)");
  p.recompute = RecomputeGranularity::kFull;
  EXPECT_TRUE(starts_with(error_of(m, p, 2, 2),
                          "moe.load_balancing_type global_aux_loss cannot be combined with recompute full"));
  m.moe.load_balancing_type = LoadBalancing::kSeqAuxLoss;
  EXPECT_EQ(error_of(m, p, 2, 2), "(no error)");
}

TEST(LayoutCheck, RedundantExperts) {
  ModelConfig m = moe_model();
  m.moe.num_experts = 4;
  m.moe.redundant_experts = 2;
  m.moe.rebalance_interval = 5;
  EXPECT_EQ(error_of(m, layout(1, 2, 1, 1), 2, 2), "(no error)");
  EXPECT_TRUE(starts_with(error_of(m, layout(2, 1, 1, 1), 2, 2),
                          "moe.redundant_experts 2 needs expert_parallel >= 2 (replicas go to other EP ranks)"));
  m.moe.redundant_experts = 3;
  EXPECT_TRUE(starts_with(error_of(m, layout(1, 2, 1, 1), 2, 2),
                          "moe.redundant_experts 3 is not divisible by expert_parallel 2"));
  m.moe.redundant_experts = 6;
  EXPECT_EQ(error_of(m, layout(1, 2, 1, 1), 2, 2),
            "moe.redundant_experts 6 exceeds num_experts x (expert_parallel - 1) = 4 (no expert needs more copies "
            "than there are EP ranks); use at most 4");
}

TEST(LayoutCheck, PipelineStages) {
  ModelConfig m = moe_model();
  m.num_layers = 6;
  std::string layers = error_of(m, layout(1, 1, 1, 4), 4, 4);
  EXPECT_TRUE(starts_with(layers, "num_layers 6 is not divisible by pipeline_parallel 4")) << layers;
  EXPECT_NE(layers.find("stage_layers"), std::string::npos) << layers;

  ParallelConfig p = layout(1, 1, 1, 4);
  p.stage_layers = {1, 2, 3};
  EXPECT_TRUE(starts_with(error_of(m, p, 4, 4), "stage_layers has 3 entries, but pipeline_parallel is 4"));
  p.stage_layers = {2, 0, 2, 2};
  EXPECT_TRUE(starts_with(error_of(m, p, 4, 4), "stage_layers[1] is 0; every pipeline stage needs at least 1 layer"));
  p.stage_layers = {2, 1, 2, 2};
  EXPECT_TRUE(starts_with(error_of(m, p, 4, 4), "stage_layers 2,1,2,2 sum to 7, but num_layers is 6"));
  p.stage_layers = {1, 1, 2, 2};
  EXPECT_EQ(error_of(m, p, 4, 4), "(no error)");
}

TEST(LayoutCheck, InterleavedSchedule) {
  ModelConfig m = moe_model();
  m.num_layers = 12;
  ParallelConfig p = layout(1, 1, 1, 2, 4);
  p.virtual_pipeline = 2;
  EXPECT_TRUE(starts_with(error_of(m, p, 4, 2), "virtual_pipeline 2 is only used by pipeline_schedule interleaved"));
  p.pipeline_schedule = PipelineSchedule::kInterleaved;
  p.virtual_pipeline = 1;
  EXPECT_TRUE(starts_with(error_of(m, p, 4, 2), "pipeline_schedule interleaved needs virtual_pipeline >= 2"));
  p.virtual_pipeline = 4;
  EXPECT_TRUE(starts_with(error_of(m, p, 4, 2),
                          "num_layers 12 is not divisible by pipeline_parallel 2 x virtual_pipeline 4 = 8"));
  p.virtual_pipeline = 3;
  p.micro_batch_num = 3;
  EXPECT_TRUE(starts_with(error_of(m, p, 3, 2), "micro_batch_num 3 is not divisible by pipeline_parallel 2"));
  ParallelConfig single = layout(1, 1, 1, 1);
  single.pipeline_schedule = PipelineSchedule::kInterleaved;
  single.virtual_pipeline = 2;
  EXPECT_TRUE(starts_with(error_of(m, single, 1, 1), "pipeline_schedule interleaved needs pipeline_parallel >= 2"));
  p.micro_batch_num = 2;
  p.stage_layers = {6, 6};
  EXPECT_TRUE(starts_with(error_of(m, p, 2, 2), "stage_layers cannot be combined with pipeline_schedule interleaved"));
}

TEST(LayoutCheck, GlobalBatch) {
  ModelConfig m = moe_model();
  std::string batch = error_of(m, layout(2, 2, 1, 1, 4), 30, 4);
  EXPECT_EQ(batch,
            "global_batch_size 30 is not divisible by data_parallel 2 x expert_parallel 2 x micro_batch_num 4 = 16 "
            "(every data replica needs whole micro-batches); use a multiple of 16 (e.g. 16 or 32)");
  EXPECT_TRUE(starts_with(error_of(m, layout(2, 2, 1, 1, 4), 8, 4), "global_batch_size 8 is not divisible by"));
  EXPECT_TRUE(starts_with(error_of(m, layout(1, 1, 1, 1), 0, 1), "global_batch_size is 0; it must be >= 1"));
}

TEST(LayoutCheck, DeviceList) {
  ParallelConfig p = layout(2, 1, 1, 1);
  p.device_list = {0, 1, 2};
  EXPECT_TRUE(starts_with(error_of(moe_model(), p, 2, 2), "device_list has 3 entries, but 2 ranks were started"));
  p.device_list = {1, 1};
  EXPECT_TRUE(starts_with(error_of(moe_model(), p, 2, 2), "device_list names world rank 1 twice"));
  p.device_list = {1, 0};
  EXPECT_EQ(error_of(moe_model(), p, 2, 2), "(no error)");
}

// The dense grid tp x cp x DP_dense: CP divides dp x ep, the sequence splits into 2 x cp chunks (each
// cut again into tp slices under sequence parallelism), the global batch is read by DP_dense replicas;
// parallel folding (expert_tensor_parallel != tensor_parallel) is refused until it exists.
TEST(LayoutCheck, ContextParallel) {
  ModelConfig m = moe_model();  // seq_length 32
  ParallelConfig p = layout(2, 1, 1, 1);
  p.context_parallel = 2;
  EXPECT_EQ(error_of(m, p, 1, 2), "(no error)");  // DP_dense 1: one replica reads the whole batch
  p.context_parallel = 4;
  EXPECT_EQ(error_of(m, p, 2, 2),
            "context_parallel 4 does not divide data_parallel 2 x expert_parallel 1 = 2 (the ranks of a stage beside "
            "tensor_parallel, which context parallelism splits into DP_dense x CP); set context_parallel to a divisor "
            "of 2 (1, 2), or data_parallel to a multiple of 4");
  ParallelConfig ep = layout(1, 2, 1, 1);
  ep.context_parallel = 4;
  EXPECT_TRUE(starts_with(error_of(m, ep, 2, 2), "context_parallel 4 does not divide")) << error_of(m, ep, 2, 2);
  EXPECT_NE(error_of(m, ep, 2, 2).find("data_parallel to a multiple of 2"), std::string::npos);
  p.context_parallel = 0;
  EXPECT_EQ(error_of(m, p, 2, 2), "context_parallel is 0; it must be >= 1");

  p = layout(4, 1, 2, 1);
  p.context_parallel = 4;
  m.seq_length = 36;
  EXPECT_EQ(error_of(m, p, 4, 8),
            "context_parallel 4 needs seq_length divisible by 2 x context_parallel = 8 (the causal load-balanced "
            "chunks), but seq_length is 36; use seq_length 32 or 40, or another context_parallel");
  m.seq_length = 40;
  EXPECT_EQ(error_of(m, p, 4, 8), "(no error)");
  p.sequence_parallel = true;
  EXPECT_EQ(error_of(m, p, 4, 8),
            "context_parallel 4 needs seq_length divisible by 2 x context_parallel x tensor_parallel = 16 (the causal "
            "load-balanced chunks, each cut into tensor_parallel sequence-parallel slices), but seq_length is 40; use "
            "seq_length 32 or 48, or another context_parallel");

  m.seq_length = 32;
  p = layout(4, 1, 1, 1, 2);
  p.context_parallel = 2;
  EXPECT_EQ(error_of(m, p, 6, 4),
            "global_batch_size 6 is not divisible by data_parallel 4 x expert_parallel 1 / context_parallel 2 x "
            "micro_batch_num 2 = 4 (every data replica needs whole micro-batches); use a multiple of 4 (e.g. 4 or 8)");
  EXPECT_EQ(error_of(m, p, 4, 4), "(no error)");
}

TEST(LayoutCheck, ExpertTensorParallelOtherThanTensorParallelIsNotSupportedYet) {
  ParallelConfig p = layout(1, 2, 2, 1);
  p.expert_tensor_parallel = 2;
  EXPECT_EQ(error_of(moe_model(), p, 2, 4), "(no error)");
  p.expert_tensor_parallel = 1;
  EXPECT_EQ(error_of(moe_model(), p, 2, 4),
            "expert_tensor_parallel 1 differs from tensor_parallel 2: parallel folding (experts with their own tensor "
            "parallelism) is not supported yet; set expert_tensor_parallel: 2 or leave it unset");
}

}  // namespace
}  // namespace moe4d
