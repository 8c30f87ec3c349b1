// config/config_names.h — the one spelling of each enum value of the config (YAML, `--layout`,
// reports, exports and the metrics all use these): name_of(kScheduleNames, PipelineSchedule::k1F1B)
// is "1f1b", value_of(kScheduleNames, "1f1b") reads it back.
#pragma once

#include <fmt/format.h>

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "config/config.h"

namespace moe4d::config_names {

template <typename E, size_t N>
using NameTable = std::array<std::pair<std::string_view, E>, N>;
inline constexpr NameTable<Precision, 3> kPrecisionNames{
    {{"fp32", Precision::kFP32}, {"bf16", Precision::kBF16}, {"fp16", Precision::kFP16}}};
inline constexpr NameTable<ComputeBackend, 2> kBackendNames{
    {{"cpu", ComputeBackend::kCpu}, {"reference", ComputeBackend::kReference}}};
inline constexpr NameTable<CheckpointFormat, 2> kCheckpointFormatNames{
    {{"full", CheckpointFormat::kFull}, {"sharded", CheckpointFormat::kSharded}}};
inline constexpr NameTable<GradCompression, 3> kGradCompressionNames{
    {{"none", GradCompression::kNone}, {"bf16", GradCompression::kBF16}, {"fp16", GradCompression::kFP16}}};
inline constexpr NameTable<OptimizerKind, 2> kOptimizerNames{
    {{"adamw", OptimizerKind::kAdamW}, {"onebit_adam", OptimizerKind::kOneBitAdam}}};
inline constexpr NameTable<PipelineSchedule, 3> kScheduleNames{{{"gpipe", PipelineSchedule::kGPipe},
                                                         {"1f1b", PipelineSchedule::k1F1B},
                                                         {"interleaved", PipelineSchedule::kInterleaved}}};
inline constexpr NameTable<RouterScore, 2> kRouterScoreNames{
    {{"softmax", RouterScore::kSoftmax}, {"sigmoid", RouterScore::kSigmoid}}};
inline constexpr NameTable<MoeDispatcher, 2> kMoeDispatcherNames{
    {{"alltoall", MoeDispatcher::kAllToAll}, {"hierarchical", MoeDispatcher::kHierarchical}}};
// Recompute as `--layout`, reports and exports name it; YAML's recompute.granularity takes the two
// that are not "none" (kGranularityNames).
inline constexpr NameTable<LoadBalancing, 3> kLoadBalancingNames{{{"aux_loss", LoadBalancing::kAuxLoss},
                                                                   {"seq_aux_loss", LoadBalancing::kSeqAuxLoss},
                                                                   {"global_aux_loss", LoadBalancing::kGlobalAuxLoss}}};
inline constexpr NameTable<RecomputeGranularity, 3> kRecomputeNames{{{"none", RecomputeGranularity::kNone},
                                                                     {"selective", RecomputeGranularity::kSelective},
                                                                     {"full", RecomputeGranularity::kFull}}};
inline constexpr NameTable<RecomputeGranularity, 2> kGranularityNames{{kRecomputeNames[2], kRecomputeNames[1]}};

template <typename E, size_t N>
std::string_view name_of(const NameTable<E, N>& table, E value) {
  for (const auto& [name, v] : table)
    if (v == value) return name;
  return "?";
}

template <typename E, size_t N>
std::string names_of(const NameTable<E, N>& table) {
  std::string out;
  for (const auto& entry : table) out += fmt::format("{}{}", out.empty() ? "" : ", ", entry.first);
  return out;
}

// "a, b or c", for messages that list the spellings.
template <typename E, size_t N>
std::string names_or(const NameTable<E, N>& table) {
  std::string out;
  for (size_t i = 0; i < N; ++i) out += fmt::format("{}{}", i == 0 ? "" : i + 1 == N ? " or " : ", ", table[i].first);
  return out;
}

template <typename E, size_t N>
std::optional<E> value_of(const NameTable<E, N>& table, std::string_view name) {
  for (const auto& [n, v] : table)
    if (n == name) return v;
  return std::nullopt;
}

// The table of an enum field's type (config_keys.h's ConfigField).
inline constexpr const auto& names_for(const Precision*) { return kPrecisionNames; }
inline constexpr const auto& names_for(const ComputeBackend*) { return kBackendNames; }
inline constexpr const auto& names_for(const CheckpointFormat*) { return kCheckpointFormatNames; }
inline constexpr const auto& names_for(const GradCompression*) { return kGradCompressionNames; }
inline constexpr const auto& names_for(const OptimizerKind*) { return kOptimizerNames; }
inline constexpr const auto& names_for(const PipelineSchedule*) { return kScheduleNames; }
inline constexpr const auto& names_for(const RouterScore*) { return kRouterScoreNames; }
inline constexpr const auto& names_for(const LoadBalancing*) { return kLoadBalancingNames; }
inline constexpr const auto& names_for(const MoeDispatcher*) { return kMoeDispatcherNames; }
inline constexpr const auto& names_for(const RecomputeGranularity*) { return kGranularityNames; }

}  // namespace moe4d::config_names
