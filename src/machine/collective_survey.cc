// machine/collective_survey.cc — timing loops over the Communicator and the per-curve fits.
#include "machine/collective_survey.h"

#include <algorithm>
#include <chrono>
#include <functional>

#include <fmt/format.h>

#include "core/error.h"

namespace moe4d {
namespace {

using Clock = std::chrono::steady_clock;

// One collective call on `group` (nullptr on ranks outside it) with buffers for `bytes`.
class CollectiveCall {
 public:
  CollectiveCall(Collective collective, Communicator* group, size_t bytes) : collective_(collective), group_(group) {
    if (!group_) return;
    const size_t n = group_->size();
    // Whole blocks of floats, one per member, at least one float each.
    block_ = std::max<size_t>(1, bytes / sizeof(float) / n);
    total_ = block_ * n;
    const size_t message = std::max<size_t>(1, bytes / sizeof(float));
    send_.assign(collective == Collective::kSendRecv ? message : total_, 1.0f);
    recv_.assign(collective == Collective::kSendRecv ? message : total_, 0.0f);
    counts_.assign(n, block_);
    displs_.resize(n);
    for (size_t r = 0; r < n; ++r) displs_[r] = r * block_;
  }

  // Bytes as plan/cluster_spec.h defines them for this collective (what the fit uses).
  double bytes() const {
    return double(collective_ == Collective::kSendRecv ? send_.size() : total_) * sizeof(float);
  }

  void run() {
    if (!group_) return;
    Communicator& g = *group_;
    switch (collective_) {
      case Collective::kAllReduce: g.all_reduce(send_.data(), total_); break;
      case Collective::kReduceScatter: g.reduce_scatter(send_.data(), recv_.data(), block_, DType::kF32); break;
      case Collective::kAllGather:
        g.all_gather(send_.data() + g.rank() * block_, recv_.data(), block_, DType::kF32);
        break;
      case Collective::kAllToAll:
        g.all_to_all_v(send_.data(), counts_.data(), displs_.data(), recv_.data(), counts_.data(), displs_.data(),
                       DType::kF32);
        break;
      case Collective::kSendRecv: {
        const int n = g.size(), me = g.rank();
        auto recv = g.recv_async(recv_.data(), recv_.size(), DType::kF32, (me + n - 1) % n, kTag);
        auto send = g.send_async(send_.data(), send_.size(), DType::kF32, (me + 1) % n, kTag);
        send->wait();
        recv->wait();
        break;
      }
    }
  }

 private:
  static constexpr int kTag = 4242;
  Collective collective_;
  Communicator* group_;
  size_t block_ = 0, total_ = 0;
  std::vector<float> send_, recv_;
  std::vector<size_t> counts_, displs_;
};

// Seconds of one call, the slowest rank deciding; every world rank gets the same number.
double timed_call(Communicator& world, CollectiveCall& call) {
  world.barrier();
  const auto t0 = Clock::now();
  call.run();
  double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  world.all_reduce(&seconds, 1, DType::kF64, ReduceOp::kMax);
  return seconds;
}

std::string format_bytes(double bytes) {
  if (bytes >= (1 << 20)) return fmt::format("{:.3g} MiB", bytes / (1 << 20));
  if (bytes >= 1024) return fmt::format("{:.3g} KiB", bytes / 1024);
  return fmt::format("{:.0f} B", bytes);
}

// The size's time is the lower quartile of the iterations: a collective needs every member on a
// core at once, so on a machine shared with other work most iterations wait for a descheduled rank;
// the lower quartile resists that and, on a quiet machine, is within the jitter of the median.
struct SizeTiming {
  double typical = 0, min = 0, max = 0;
};

SizeTiming time_size(Communicator& world, CollectiveCall& call, const CollectiveSurveyOptions& options) {
  call.run();  // warm-up: MPI connections, registration, first-touch of the buffers
  std::vector<double> times = {timed_call(world, call)};
  const int iters = std::clamp(static_cast<int>(options.target_seconds / std::max(times[0], 1e-7)),
                               options.min_iters, options.max_iters);
  for (int i = 1; i < iters; ++i) times.push_back(timed_call(world, call));
  std::sort(times.begin(), times.end());
  return {times[times.size() / 4], times.front(), times.back()};
}

}  // namespace

std::vector<size_t> survey_message_sizes(const CollectiveSurveyOptions& options) {
  if (options.min_bytes < sizeof(float) || options.max_bytes < options.min_bytes || options.size_step < 2)
    fail("collective survey: message sizes {}..{} B with step {} are not a valid range", options.min_bytes,
         options.max_bytes, options.size_step);
  std::vector<size_t> sizes;
  for (size_t bytes = options.min_bytes; bytes <= options.max_bytes; bytes *= options.size_step) sizes.push_back(bytes);
  return sizes;
}

std::vector<CollectiveCurve> survey_collectives(Communicator& world, const CollectiveSurveyOptions& options,
                                                const ProgressFn& progress) {
  const std::vector<size_t> sizes = survey_message_sizes(options);
  std::vector<CollectiveCurve> curves;
  const Collective collectives[] = {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather,
                                    Collective::kAllToAll, Collective::kSendRecv};
  for (int n = 2; n <= world.size(); ++n) {
    const bool member = world.rank() < n;
    std::unique_ptr<Communicator> group = world.split(member ? 0 : -1, world.rank(), fmt::format("bench{}", n));
    for (Collective collective : collectives) {
      CollectiveCurve curve;
      curve.collective = collective;
      curve.ranks = n;
      for (size_t bytes : sizes) {
        CollectiveCall call(collective, group.get(), bytes);
        // Non-members hold no buffers; every rank takes the byte count from rank 0, a member.
        double call_bytes = member ? call.bytes() : 0;
        world.all_reduce(&call_bytes, 1, DType::kF64, ReduceOp::kMax);
        const SizeTiming t = time_size(world, call, options);
        curve.samples.push_back({call_bytes, t.typical});
        curve.min_seconds.push_back(t.min);
        curve.max_seconds.push_back(t.max);
      }
      curve.fit = fit_alpha_beta_regimes(curve.samples, collective, n);
      if (progress) {
        std::string regimes;
        for (const AlphaBetaRegime& r : curve.fit.regimes)
          regimes += fmt::format("{}{:.1f} us + {:.2f} GB/s from {}", regimes.empty() ? "" : "; ", r.fit.latency * 1e6,
                                 r.fit.bus_bandwidth / 1e9, format_bytes(r.min_bytes));
        progress(fmt::format("{} over {} ranks: {} (fit within {:.0f}% median, {:.0f}% worst)", collective_name(collective),
                             n, regimes, curve.fit.median_relative_error * 100, curve.fit.max_relative_error * 100));
      }
      curves.push_back(std::move(curve));
    }
  }
  return curves;
}

}  // namespace moe4d
