// machine/machine_bench.cc — runs the surveys on every rank and turns them into a cluster.
#include "machine/machine_bench.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "core/error.h"

namespace moe4d {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Every rank timed the same shapes at the same time; keep the slowest rank's time per shape and the
// lowest of the ranks' best rates (what each device can count on while all of them work).
void combine_ranks(Communicator& world, GemmSurvey& survey) {
  const size_t n = survey.timings.size();
  std::vector<double> seconds(n), best(n);
  for (size_t i = 0; i < n; ++i) {
    seconds[i] = survey.timings[i].seconds;
    best[i] = survey.timings[i].best_gflops;
  }
  if (n > 0) {
    world.all_reduce(seconds.data(), n, DType::kF64, ReduceOp::kMax);
    world.all_reduce(best.data(), n, DType::kF64, ReduceOp::kMin);
  }
  for (size_t i = 0; i < n; ++i) {
    survey.timings[i].seconds = seconds[i];
    survey.timings[i].best_gflops = best[i];
  }
}

std::string survey_summary(const GemmSurvey& s) {
  if (!s.available) return fmt::format("{}: not available ({})", precision_name(s.precision), s.reason);
  return fmt::format("{}: peak {:.1f} GFLOP/s ({})", precision_name(s.precision), s.peak_flops / 1e9, s.implementation);
}

}  // namespace

MachineBenchResult run_machine_bench(Communicator& world, const MachineBenchOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  const bool lead = world.rank() == 0;
  auto say = [&](const std::string& line) {
    if (lead && options.progress) options.progress(line);
  };
  MachineBenchResult result;
  MachineMeasurements& m = result.measurements;
  m.host = read_host_info();
  m.ranks = world.size();
  say(fmt::format("measuring {} ({} cores) with {} rank(s){}", m.host.cpu_model.empty() ? "this machine" : m.host.cpu_model,
                  m.host.online_cores, m.ranks, options.quick ? " (quick)" : ""));

  if (m.host.online_cores > 0 && m.ranks > m.host.online_cores)
    say(fmt::format("{} ranks on {} cores: ranks time-share cores, so the collective timings describe an "
                    "oversubscribed machine (one rank per core is what the planner's devices mean)",
                    m.ranks, m.host.online_cores));
  const std::vector<GemmShape> shapes = gemm_survey_shapes(options.quick);
  const int repeats = options.quick ? 2 : 5;
  for (int p = 0; p < kNumPrecisions; ++p) {
    const Precision precision = static_cast<Precision>(p);
    world.barrier();
    GemmSurvey survey = time_gemm_shapes(precision, shapes, repeats, lead ? options.progress : ProgressFn{});
    combine_ranks(world, survey);
    fit_efficiency_curve(survey);
    say(survey_summary(survey));
    m.gemm[p] = std::move(survey);
  }

  world.barrier();
  m.memory = measure_memory_bandwidth(options.quick ? size_t{4} << 20 : size_t{32} << 20, options.quick ? 2 : 7);
  double rates[2] = {m.memory.copy, m.memory.triad};
  world.all_reduce(rates, 2, DType::kF64, ReduceOp::kMin);  // the slowest rank
  m.memory.copy = rates[0];
  m.memory.triad = rates[1];
  say(fmt::format("memory bandwidth per rank: copy {:.1f} GB/s, triad {:.1f} GB/s", m.memory.copy / 1e9,
                  m.memory.triad / 1e9));

  CollectiveSurveyOptions comm;
  if (options.quick) {
    comm.max_bytes = size_t{256} << 10;
    comm.size_step = 8;
    comm.target_seconds = 0.02;
    comm.min_iters = 3;
    comm.max_iters = 20;
  }
  m.collectives = survey_collectives(world, comm, lead ? options.progress : ProgressFn{});

  result.cluster = machine_cluster(m);
  result.details = machine_details_json(m);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  result.details["seconds"] = seconds;
  say(fmt::format("done in {:.0f} s", seconds));
  return result;
}

ClusterSpec machine_cluster(const MachineMeasurements& m) {
  const GemmSurvey& fp32 = m.gemm[static_cast<int>(Precision::kFP32)];
  if (!fp32.available || fp32.peak_flops <= 0) fail("moe4d bench: the fp32 GEMM survey has no result");
  ClusterSpec c;
  c.name = "this-machine";
  c.nodes = 1;
  c.devices_per_node = m.ranks;
  c.device.name = fmt::format("{} core, 1 BLAS thread", m.host.cpu_model.empty() ? "CPU" : m.host.cpu_model);
  c.device.memory_bytes = (m.host.memory_bytes > 0 ? m.host.memory_bytes : kGiB) / m.ranks;
  c.device.memory_bandwidth = m.memory.triad;
  std::string sixteen_bit;
  for (int p = 0; p < kNumPrecisions; ++p) {
    const GemmSurvey& s = m.gemm[p];
    if (!s.available || s.peak_flops <= 0) {
      sixteen_bit += fmt::format("; {} not available: {}", precision_name(static_cast<Precision>(p)), s.reason);
      continue;
    }
    c.device.peak_flops[p] = s.peak_flops;
    c.device.gemm_efficiency[p] = s.curve;
  }

  const CollectiveCurve* widest_all_reduce = nullptr;
  const CollectiveCurve* pair_send_recv = nullptr;
  for (const CollectiveCurve& curve : m.collectives) {
    for (const AlphaBetaRegime& r : curve.fit.regimes)
      c.measured[static_cast<int>(LinkTier::kIntraNode)][static_cast<int>(curve.collective)].push_back(
          {curve.ranks, r.fit.latency, r.fit.bus_bandwidth, r.min_bytes});
    if (curve.collective == Collective::kAllReduce && (!widest_all_reduce || curve.ranks > widest_all_reduce->ranks))
      widest_all_reduce = &curve;
    if (curve.collective == Collective::kSendRecv && curve.ranks == 2) pair_send_recv = &curve;
  }
  for (auto& table : c.measured[static_cast<int>(LinkTier::kIntraNode)])
    std::sort(table.begin(), table.end(), [](const CollectiveSample& a, const CollectiveSample& b) {
      return a.ranks != b.ranks ? a.ranks < b.ranks : a.min_bytes < b.min_bytes;
    });
  c.intra.kind = LinkKind::kSwitch;
  std::string link_note;
  if (widest_all_reduce && pair_send_recv) {
    c.intra.bandwidth = widest_all_reduce->fit.regimes.back().fit.bus_bandwidth;
    c.intra.latency = pair_send_recv->fit.regimes.front().fit.latency;
    link_note = "intra_node link = large-message all-reduce bandwidth of the widest group, small-message send/recv "
                "latency";
  } else {
    c.intra.bandwidth = m.memory.copy;
    c.intra.latency = 0;
    link_note = "one rank, no collectives measured: intra_node link = memory copy rate";
  }
  c.inter.nic_bandwidth = c.intra.bandwidth;
  c.inter.latency = c.intra.latency;
  c.description = fmt::format(
      "measured by moe4d bench{}: {}, {} rank(s) on {} core(s), one device = one single-threaded rank; {}; "
      "inter_node not measurable on one node (repeats intra_node){}",
      m.host.hostname.empty() ? "" : " on " + m.host.hostname, m.host.cpu_model.empty() ? "CPU" : m.host.cpu_model,
      m.ranks, m.host.online_cores, link_note, sixteen_bit);
  c.validate("moe4d bench");
  return c;
}

nlohmann::json machine_details_json(const MachineMeasurements& m) {
  using nlohmann::json;
  json gemm = json::object();
  for (const GemmSurvey& s : m.gemm) {
    json entry = {{"available", s.available}};
    if (!s.available) {
      entry["reason"] = s.reason;
    } else {
      entry["implementation"] = s.implementation;
      entry["peak_gflops"] = s.peak_flops / 1e9;
      json curve = json::array();
      for (const EfficiencyPoint& p : s.curve) curve.push_back({{"size", p.size}, {"efficiency", p.efficiency}});
      entry["curve"] = curve;
      json shapes = json::array();
      for (const GemmTiming& t : s.timings)
        shapes.push_back({{"label", t.shape.label}, {"m", t.shape.m}, {"n", t.shape.n}, {"k", t.shape.k},
                          {"size", t.shape.size()}, {"seconds", t.seconds},
                          {"gflops", t.shape.flops() / t.seconds / 1e9}, {"best_variant_gflops", t.best_gflops}});
      entry["shapes"] = shapes;
    }
    gemm[precision_name(s.precision)] = entry;
  }
  json collectives = json::array();
  for (const CollectiveCurve& c : m.collectives) {
    json sizes = json::array();
    for (size_t i = 0; i < c.samples.size(); ++i)
      sizes.push_back({{"bytes", c.samples[i].bytes}, {"typical_s", c.samples[i].seconds}, {"min_s", c.min_seconds[i]},
                       {"max_s", c.max_seconds[i]},
                       {"fit_s", alpha_beta_seconds(c.fit.at(c.samples[i].bytes), c.collective, c.ranks,
                                                    c.samples[i].bytes)}});
    json regimes = json::array();
    for (const AlphaBetaRegime& r : c.fit.regimes)
      regimes.push_back({{"min_bytes", r.min_bytes}, {"latency_us", r.fit.latency * 1e6},
                         {"bus_bandwidth_gbps", r.fit.bus_bandwidth / 1e9}});
    collectives.push_back({{"collective", collective_name(c.collective)}, {"ranks", c.ranks}, {"regimes", regimes},
                           {"fit_median_relative_error", c.fit.median_relative_error},
                           {"fit_max_relative_error", c.fit.max_relative_error}, {"sizes", sizes}});
  }
  return {{"host", {{"cpu_model", m.host.cpu_model}, {"hostname", m.host.hostname}, {"online_cores", m.host.online_cores},
                    {"memory_bytes", m.host.memory_bytes}}},
          {"ranks", m.ranks},
          {"gemm", gemm},
          {"memory_bandwidth", {{"copy_gbps", m.memory.copy / 1e9}, {"triad_gbps", m.memory.triad / 1e9},
                                {"array_bytes", m.memory.array_bytes}}},
          {"collectives", collectives}};
}

}  // namespace moe4d
