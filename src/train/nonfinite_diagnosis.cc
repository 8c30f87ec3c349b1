// train/nonfinite_diagnosis.cc — the tracer of a diagnosis re-run and the world's agreement on the
// first non-finite tensor (see the header).
#include "train/nonfinite_diagnosis.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#include "backend/cpu_backend.h"

namespace moe4d {
namespace {

// Stage and layer weights of the order key; the within-layer sequence stays below kLayerWeight.
constexpr double kStageWeight = 1e12;
constexpr double kLayerWeight = 1e8;
constexpr size_t kMaxDescription = 512;

}  // namespace

NonfiniteTracer::NonfiniteTracer(const ParamStore& params, int num_layers, TensorInspector* upstream, Backend* backend)
    : params_(params),
      backend_(backend ? *backend : thread_cpu_backend()),
      num_layers_(num_layers),
      upstream_(upstream) {}

double NonfiniteTracer::order(int stage, int layer, int64_t within) const {
  // Layers run -1 (embedding) .. num_layers (final norm and head); forward visits them upward,
  // backward downward.
  const int position = stage == 2 || stage == 3 ? num_layers_ - layer : layer + 1;
  return stage * kStageWeight + position * kLayerWeight + double(std::min<int64_t>(within, int64_t(kLayerWeight) - 1));
}

void NonfiniteTracer::check(const TensorSite& site, const float* data, int64_t n) {
  const int64_t within = sequence_++;
  if (backend_.all_finite(data, n)) return;
  const double key = order(site.forward() ? 1 : 2, params_.info(site.param_id).layer, within);
  if (key < first_.order) first_ = {key, describe_tensor_site(site, params_)};
}

void NonfiniteTracer::on_operand(const TensorSite& site, const float* data, int64_t n) {
  if (upstream_) upstream_->on_operand(site, data, n);
  check(site, data, n);
}

void NonfiniteTracer::on_result(const TensorSite& site, float* data, int64_t n) {
  if (upstream_) upstream_->on_result(site, data, n);
  check(site, data, n);
}

void NonfiniteTracer::check_values() {
  for (int id = 0; id < params_.size(); ++id) {
    const ParamInfo& info = params_.info(id);
    if (backend_.all_finite(params_.value(id), info.numel())) continue;
    const double key = order(0, info.layer, id);
    if (key < first_.order) first_ = {key, fmt::format("{} (fp32 master weight)", info.name)};
  }
}

void NonfiniteTracer::check_gradients() {
  for (int id = 0; id < params_.size(); ++id) {
    const ParamInfo& info = params_.info(id);
    if (backend_.all_finite(params_.grad(id), info.numel())) continue;
    const double key = order(3, info.layer, id);
    if (key < first_.order) first_ = {key, fmt::format("{} gradient (after the gradient reduction)", info.name)};
  }
}

NonfiniteDiagnosis agree_on_first_nonfinite(const NonfiniteFinding& mine, Communicator& world) {
  double best = mine.order;
  world.all_reduce(&best, 1, DType::kF64, ReduceOp::kMin);
  NonfiniteDiagnosis out;
  if (best == std::numeric_limits<double>::infinity()) return out;
  int rank = mine.order == best ? world.rank() : INT_MAX;
  world.all_reduce(&rank, 1, DType::kI32, ReduceOp::kMin);
  std::vector<char> text(kMaxDescription, '\0');
  if (rank == world.rank())  // a host string
    std::memcpy(text.data(), mine.what.data(), std::min(mine.what.size(), kMaxDescription - 1));
  world.broadcast(text.data(), text.size(), DType::kU8, rank);
  out.found = true;
  out.rank = world.world_ranks()[rank];
  out.what = text.data();
  return out;
}

}  // namespace moe4d
