// plan/layout.cc — names, printing and parsing of planner layouts.
#include "plan/layout.h"

#include <fmt/format.h>

#include <cstdlib>
#include <limits>
#include <map>
#include <sstream>

#include "config/config_names.h"
#include "core/error.h"

namespace moe4d {

using config_names::kRecomputeNames;
using config_names::kScheduleNames;
using config_names::name_of;
using config_names::names_or;
using config_names::value_of;

int Layout::size(ParallelDim dim) const {
  switch (dim) {
    case ParallelDim::kTP: return tp;
    case ParallelDim::kEP: return ep;
    case ParallelDim::kDP: return dp;
    case ParallelDim::kPP: return pp;
  }
  return 1;
}

// The tables' entries are string literals, so data() is a C string.
const char* schedule_name(PipelineSchedule schedule) { return name_of(kScheduleNames, schedule).data(); }
const char* recompute_name(RecomputeGranularity recompute) { return name_of(kRecomputeNames, recompute).data(); }

std::string rank_order_string(const RankOrder& order) {
  return fmt::format("{}-{}-{}-{}", parallel_dim_name(order[0]), parallel_dim_name(order[1]), parallel_dim_name(order[2]),
                     parallel_dim_name(order[3]));
}

RankOrder parse_rank_order(const std::string& text) {
  RankOrder order{};
  bool seen[4] = {false, false, false, false};
  std::stringstream in(text);
  std::string part;
  int n = 0;
  while (std::getline(in, part, '-')) {
    ParallelDim dim;
    if (part == "tp") dim = ParallelDim::kTP;
    else if (part == "ep") dim = ParallelDim::kEP;
    else if (part == "dp") dim = ParallelDim::kDP;
    else if (part == "pp") dim = ParallelDim::kPP;
    else fail("rank order '{}': expected a permutation of tp, ep, dp, pp joined by '-', e.g. tp-ep-dp-pp", text);
    if (n >= 4 || seen[static_cast<int>(dim)])
      fail("rank order '{}': expected each of tp, ep, dp, pp exactly once", text);
    seen[static_cast<int>(dim)] = true;
    order[n++] = dim;
  }
  if (n != 4) fail("rank order '{}': expected each of tp, ep, dp, pp exactly once", text);
  return order;
}

std::string layout_to_string(const Layout& l) {
  std::string out = fmt::format("dp={},ep={},tp={},pp={},mbs={},mb={},schedule={}", l.dp, l.ep, l.tp, l.pp,
                                l.micro_batch_size, l.micro_batch_num, schedule_name(l.schedule));
  if (l.schedule == PipelineSchedule::kInterleaved) out += fmt::format(",v={}", l.virtual_stages);
  out += fmt::format(",recompute={},zero={},order={}", recompute_name(l.recompute), l.zero_stage,
                     rank_order_string(l.order));
  if (l.sequence_parallel) out += ",sp=1";
  if (l.cp > 1) out += fmt::format(",cp={}", l.cp);
  if (l.dispatcher == MoeDispatcher::kHierarchical) out += ",dispatch=hierarchical";
  return out;
}

std::string layout_dims_string(const Layout& l) {
  return fmt::format("dp{} ep{} tp{} pp{}{}{}{}", l.dp, l.ep, l.tp, l.pp, l.sequence_parallel ? " sp" : "",
                     l.cp > 1 ? fmt::format(" cp{}", l.cp) : std::string(),
                     l.dispatcher == MoeDispatcher::kHierarchical ? " hier" : "");
}

namespace {

int parse_positive(const std::string& key, const std::string& value) {
  char* end = nullptr;
  const long v = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || v <= 0 || v > 1000000)
    fail("--layout {}={}: expected a positive integer", key, value);
  return static_cast<int>(v);
}

// How messages name the inputs of a layout: the --layout keys, or the config keys they came from.
struct LayoutKeyNames {
  const char* mb;
  const char* mbs;
  const char* v;
  const char* schedule;
  const char* global_batch;
  const char* cp;
};
constexpr LayoutKeyNames kFlagNames{"--layout mb=", "--layout mbs=", "--layout v=", "schedule=interleaved",
                                    "global batch", "--layout cp="};
constexpr LayoutKeyNames kConfigNames{"parallel_config.micro_batch_num ", "micro-batch size ",
                                      "parallel_config.virtual_pipeline ", "pipeline_schedule: interleaved",
                                      "train.global_batch_size", "parallel_config.context_parallel "};

// The checks and micro-batch arithmetic shared by parse_layout and layout_from_parallel_config.
// `mb` / `mbs` 0: derived from the other (mbs defaults to 1).
Layout finish_layout(Layout l, int64_t mb, int64_t mbs, bool have_v, int64_t global_batch, int devices,
                     const LayoutKeyNames& k) {
  const int64_t world = int64_t{l.dp} * l.ep * l.tp * l.pp;
  if (world != devices)
    fail("parallel size mismatch: dp {} x ep {} x tp {} x pp {} = {}, but {} devices are available", l.dp, l.ep, l.tp,
         l.pp, world, devices);
  if (l.schedule == PipelineSchedule::kInterleaved) {
    if (!have_v) l.virtual_stages = 2;
    if (l.virtual_stages < 2)
      fail("{}{}: the interleaved schedule needs v >= 2 model chunks per rank", k.v, l.virtual_stages);
  } else if (have_v && l.virtual_stages != 1) {
    fail("{}{}: virtual stages need {}", k.v, l.virtual_stages, k.schedule);
  }
  if (l.cp < 1 || (l.dp * l.ep) % l.cp != 0)
    fail("{}{} does not divide dp {} x ep {} = {} (context parallelism is carved out of the data replicas)", k.cp, l.cp,
         l.dp, l.ep, l.dp * l.ep);
  // The CP ranks of a dense replica share its sequences.
  const int64_t replicas = int64_t{l.dp} * l.ep / l.cp;
  if (global_batch % replicas != 0)
    fail("{} {} is not divisible by the {} data replicas (dp {} x ep {}{})", k.global_batch, global_batch, replicas,
         l.dp, l.ep, l.cp > 1 ? fmt::format(" / cp {}", l.cp) : std::string());
  const int64_t per_replica = global_batch / replicas;
  if (mb > 0 && mbs > 0) {
    if (mb * mbs != per_replica)
      fail("{}{} x mbs={} = {} sequences per data replica, but {} {} / {} replicas = {}", k.mb, mb, mbs, mb * mbs,
           k.global_batch, global_batch, replicas, per_replica);
  } else if (mb > 0) {
    if (per_replica % mb != 0)
      fail("{}{}: {} sequences per data replica ({} {} / {} replicas) do not split into {} micro-batches", k.mb,
           mb, per_replica, k.global_batch, global_batch, replicas, mb);
    mbs = per_replica / mb;
  } else {
    if (mbs == 0) mbs = 1;
    if (per_replica % mbs != 0)
      fail("{}{}: {} sequences per data replica ({} {} / {} replicas) do not split into micro-batches of {}",
           k.mbs, mbs, per_replica, k.global_batch, global_batch, replicas, mbs);
    mb = per_replica / mbs;
  }
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  if (mbs > kIntMax)
    fail("{} {}: a micro-batch of {} sequences ({} / {} replicas / {} micro-batches) is more than {} sequences; "
         "raise {} or lower {}",
         k.global_batch, global_batch, mbs, global_batch, replicas, mb, kIntMax,
         std::string(k.mb).substr(0, std::string(k.mb).size() - 1), k.global_batch);
  if (mb > kIntMax)
    fail("{} {}: more than {} micro-batches per data replica; lower {}", k.global_batch, global_batch, kIntMax,
         k.global_batch);
  l.micro_batch_size = static_cast<int>(mbs);
  l.micro_batch_num = static_cast<int>(mb);
  return l;
}

}  // namespace

Layout parse_layout(const std::string& text, int64_t global_batch, int devices) {
  Layout l;
  int mb = 0;
  int mbs = 0;
  bool have_v = false;
  std::map<std::string, bool> seen;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string::npos) fail("--layout: '{}' is not key=value (e.g. dp=2,ep=8,tp=4,pp=1)", item);
    const std::string key = item.substr(0, eq);
    const std::string value = item.substr(eq + 1);
    if (seen[key]) fail("--layout: key {} given twice", key);
    seen[key] = true;
    if (key == "dp") l.dp = parse_positive(key, value);
    else if (key == "ep") l.ep = parse_positive(key, value);
    else if (key == "tp") l.tp = parse_positive(key, value);
    else if (key == "pp") l.pp = parse_positive(key, value);
    else if (key == "cp") l.cp = parse_positive(key, value);
    else if (key == "mb" || key == "micro_batch_num") mb = parse_positive(key, value);
    else if (key == "mbs") mbs = parse_positive(key, value);
    else if (key == "v") { l.virtual_stages = parse_positive(key, value); have_v = true; }
    else if (key == "schedule") {
      const auto schedule = value_of(kScheduleNames, value);
      if (!schedule) fail("--layout schedule={}: expected {}", value, names_or(kScheduleNames));
      l.schedule = *schedule;
    } else if (key == "recompute") {
      const auto recompute = value == "false" ? RecomputeGranularity::kNone
                             : value == "true"  ? RecomputeGranularity::kFull
                                                : value_of(kRecomputeNames, value);
      if (!recompute) fail("--layout recompute={}: expected {}", value, names_or(kRecomputeNames));
      l.recompute = *recompute;
    } else if (key == "zero") {
      if (value != "0" && value != "1" && value != "2" && value != "3")
        fail("--layout zero={}: expected 0, 1, 2 or 3", value);
      l.zero_stage = value[0] - '0';
    } else if (key == "order") {
      l.order = parse_rank_order(value);
    } else if (key == "sp") {
      if (value != "0" && value != "1" && value != "true" && value != "false")
        fail("--layout sp={}: expected 0 or 1 (sequence parallelism off or on)", value);
      l.sequence_parallel = value == "1" || value == "true";
    } else if (key == "dispatch") {
      const auto dispatcher = value_of(config_names::kMoeDispatcherNames, value);
      if (!dispatcher) fail("--layout dispatch={}: expected {}", value, names_or(config_names::kMoeDispatcherNames));
      l.dispatcher = *dispatcher;
    } else {
      fail("--layout: unknown key '{}', expected dp, ep, tp, pp, cp, mb, mbs, schedule, v, recompute, zero, order, sp "
           "or dispatch",
           key);
    }
  }
  return finish_layout(l, mb, mbs, have_v, global_batch, devices, kFlagNames);
}

Layout layout_from_parallel_config(const ParallelConfig& p, int64_t global_batch, int devices) {
  if (!p.device_list.empty())
    fail("parallel_config.device_list: the planner models rank orders, not explicit device lists; remove it to plan");
  if (!p.stage_layers.empty())
    fail("parallel_config.stage_layers: the planner splits layers evenly over stages; remove it to plan");
  // Built directly, not through a --layout string, so that every message names the config key.
  Layout l;
  l.dp = p.data_parallel;
  l.ep = p.expert_parallel;
  l.tp = p.tensor_parallel;
  l.pp = p.pipeline_parallel;
  l.schedule = p.pipeline_schedule;
  l.recompute = p.recompute;
  l.zero_stage = p.zero_stage;
  l.sequence_parallel = p.sequence_parallel;
  l.cp = p.context_parallel;
  l.order = parse_rank_order(p.rank_order);
  const bool interleaved = p.pipeline_schedule == PipelineSchedule::kInterleaved;
  if (interleaved || p.virtual_pipeline != 1) l.virtual_stages = p.virtual_pipeline;
  return finish_layout(l, p.micro_batch_num, 0, interleaved || p.virtual_pipeline != 1, global_batch, devices,
                       kConfigNames);
}

ParallelConfig layout_to_parallel_config(const Layout& l, const ParallelConfig& base) {
  ParallelConfig p = base;
  p.data_parallel = l.dp;
  p.expert_parallel = l.ep;
  p.tensor_parallel = l.tp;
  p.pipeline_parallel = l.pp;
  p.micro_batch_num = l.micro_batch_num;
  p.recompute = l.recompute;
  p.zero_stage = l.zero_stage;
  p.pipeline_schedule = l.schedule;
  p.virtual_pipeline = l.virtual_stages;
  p.rank_order = rank_order_string(l.order);
  p.sequence_parallel = l.sequence_parallel;
  p.context_parallel = l.cp;
  p.device_list.clear();
  p.stage_layers.clear();
  return p;
}

}  // namespace moe4d
