// The blocks' parameter-granular gradient reports (model/layer_hooks.h, model/block_matmul.h), which
// ZeRO-2/3 reduce buckets on: with hooks that cut every weight at unaligned positions, one backward
// gives the gradients of a backward without hooks (bit for bit where the BLAS tiles rows as
// model/block_matmul.h says, else to float rounding); every element of every parameter is reported
// exactly once per backward (the tied table twice: head, then embedding), before its layer's end;
// and per group the reports come in reverse flat order as one contiguous front, which is what
// bounds ZeRO's peak.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>

#include "core/rng.h"
#include "model/block_matmul.h"
#include "model/param_store.h"
#include "model/transformer.h"

namespace moe4d {
namespace {

ModelConfig blocks_config(bool tied, int shared_experts) {
  ModelConfig m;
  m.vocab_size = 128;
  m.hidden_size = 64;
  m.num_layers = 3;
  m.num_heads = 4;
  m.ffn_hidden_size = 96;
  m.seq_length = 8;
  m.moe.num_experts = 4;
  m.moe.top_k = 1;  // with 16 tokens some experts may get none: their reports must still come
  m.moe.layer_freq = 2;
  m.moe.aux_loss_coeff = 0.01;
  m.tie_embeddings = tied;
  m.moe.shared_experts = shared_experts;
  return m;
}

// Cuts every `every` elements of each group's flat buffer (not row aligned) and records reports.
class RecordingHooks : public LayerHooks {
 public:
  RecordingHooks(const ParamStore& params, size_t every) : params_(params), every_(every) {}
  void before_layer(int, int, bool) override {}
  void after_layer(int layer, bool backward) override {
    if (backward) layers_done_.push_back(layer);
  }
  void grad_ready(int param, size_t begin, size_t end) override {
    const ParamInfo& info = params_.info(param);
    reports.push_back({param, info.group, info.offset + begin, info.offset + end, int(layers_done_.size())});
  }
  size_t grad_cut_below(int param, size_t end) const override {
    const size_t flat = params_.info(param).offset + end - 1;
    const size_t cut = flat / every_ * every_;
    return cut > params_.info(param).offset ? cut - params_.info(param).offset : 0;
  }

  struct Report {
    int param;
    ParamGroup group;
    size_t begin, end;  // flat
    int layers_before;  // layers whose backward had ended when this came
  };
  std::vector<Report> reports;
  std::vector<int> layers_done_;

 private:
  const ParamStore& params_;
  size_t every_;
};

struct Net {
  explicit Net(const ModelConfig& config) : model(config), pc(make_single_rank_context()) {
    net = std::make_unique<Transformer>(model, *pc, std::vector<ChunkSpec>{{0, model.num_layers, true, true}}, params);
    params.finalize();
    params.init_values(5);
    for (MoeBlock* b : net->moe_blocks())
      stats.push_back({.layer = b->layer(), .tokens_per_expert = std::vector<double>(model.moe.num_experts)});
    CounterRng rng(3);
    for (int i = 0; i < 2 * model.seq_length; ++i) {
      tokens.push_back(int(rng.next_u64() % model.vocab_size));
      targets.push_back(int(rng.next_u64() % model.vocab_size));
    }
  }
  void backward(LayerHooks* hooks) {
    net->set_layer_hooks(hooks);
    BlockContext ctx{*pc, params, model, net->rope(), state.arena, scratch, 2, model.seq_length, 1.0f,
                     RecomputeGranularity::kNone, &stats};
    HeadOutput head;
    net->forward(0, tokens.data(), targets.data(), nullptr, state, ctx, &head);
    net->backward(0, nullptr, nullptr, state, ctx, {});
  }
  ModelConfig model;
  std::unique_ptr<ParallelContext> pc;
  ParamStore params;
  std::unique_ptr<Transformer> net;
  MicroBatchState state;
  Arena scratch;
  std::vector<MoeLayerStats> stats;
  std::vector<int> tokens, targets;
};

void check(bool tied, int shared_experts = 0) {
  const ModelConfig m = blocks_config(tied, shared_experts);
  Net plain(m), cut(m);
  plain.backward(nullptr);
  RecordingHooks hooks(cut.params, 100);
  cut.backward(&hooks);

  for (ParamGroup g : {ParamGroup::kDense, ParamGroup::kExpert}) {
    const size_t n = plain.params.flat_size(g);
    ASSERT_GT(n, 0u);
    // Bit for bit where the BLAS computes every element of C in the same K order whatever the rows
    // of the call (seen on Skylake-X); OpenBLAS on an AVX2 EPYC takes other kernels for small GEMMs,
    // whose sums round differently: there the blocks agree to float rounding.
    const float *a = plain.params.flat_grads(g), *b = cut.params.flat_grads(g);
    double scale = 0, worst = 0;
    for (size_t i = 0; i < n; ++i) {
      scale = std::max(scale, double(std::abs(a[i])));
      worst = std::max(worst, double(std::abs(a[i] - b[i])));
    }
    std::printf("group %d: %zu elements, max |one GEMM - row blocks| %.3g of max |grad| %.3g, bit-identical: %s\n",
                int(g), n, worst, scale, std::memcmp(a, b, n * sizeof(float)) == 0 ? "yes" : "no");
    EXPECT_LE(worst, 1e-6 * scale) << "row-blocked weight gradients differ from one GEMM";
  }
  // Coverage: each element once (the tied table twice), before its own layer's backward ended.
  std::map<int, std::vector<int>> seen;
  for (const auto& r : hooks.reports) {
    const ParamInfo& info = cut.params.info(r.param);
    std::vector<int>& count = seen[r.param];
    count.resize(size_t(info.numel()));
    for (size_t i = r.begin; i < r.end; ++i) ++count[i - info.offset];
    // Position of the parameter's layer in backward order: head, layers down, embedding.
    const int own = info.layer == m.num_layers ? 0 : info.layer == -1 ? m.num_layers + 1 : m.num_layers - info.layer;
    EXPECT_LE(r.layers_before, own) << info.name << " reported after its layer's end";
  }
  int split_params = 0;
  std::map<int, int> reports_of;
  for (const auto& r : hooks.reports) ++reports_of[r.param];
  for (int id = 0; id < cut.params.size(); ++id) {
    const ParamInfo& info = cut.params.info(id);
    const int expected = tied && info.name == "embed.weight" ? 2 : 1;
    ASSERT_EQ(seen.count(id), 1u) << info.name << " never reported";
    for (int c : seen[id]) ASSERT_EQ(c, expected) << info.name;
    split_params += reports_of[id] > expected ? 1 : 0;
  }
  EXPECT_GE(split_params, 5) << "large weights were reported in several blocks";
  // Per group one front moving down: each report ends where the previous one began, or below it.
  // (The tied table's head round sits at the start of the buffer, out of that order: left out.)
  for (ParamGroup g : {ParamGroup::kDense, ParamGroup::kExpert}) {
    size_t low = SIZE_MAX;
    for (const auto& r : hooks.reports) {
      if (r.group != g) continue;
      if (tied && r.layers_before == 0 && cut.params.info(r.param).name == "embed.weight") continue;
      EXPECT_LE(r.end, low) << cut.params.info(r.param).name << " [" << r.begin << ", " << r.end << ")";
      low = std::min(low, r.begin);
    }
  }
}

TEST(GradBlocks, RowBlocksMatchOneGemmAndReportEveryElementOnceInReverseOrder) { check(false); }

TEST(GradBlocks, TiedTableIsReportedByTheHeadAndAgainByTheEmbedding) { check(true); }

TEST(GradBlocks, SharedExpertsToo) { check(false, 2); }

}  // namespace
}  // namespace moe4d
