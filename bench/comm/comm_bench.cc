// bench/comm/comm_bench.cc — how much the Communicator costs over raw MPI, and how much of an async
// all_reduce the progress thread hides behind compute. Prints one JSON document (rank 0).
//
// usage: mpirun -np N comm_bench [--max-mib=64] [--iters=10] [--overlap-mib=4,16,64] [--no-sweep]
//   sweep:   all_reduce, reduce_scatter, all_gather, all_to_all_v at 1 KiB .. max-mib MiB (x4 steps);
//            best-of-iters time (max over ranks) after warm-up for raw blocking MPI, the Communicator
//            with default progress options, and the Communicator with caller polling only; the ratio
//            is communicator / raw. Size = the largest buffer of the operation (nccl-tests convention);
//            bus bandwidth = size / time x (2(n-1)/n for all_reduce, (n-1)/n otherwise).
//   overlap: all_reduce_async of S MiB, a GEMM loop sized to take about as long as the all_reduce
//            alone, then wait(). exposed = time blocked in wait(), busy = start to completion; medians
//            over iterations, for caller polling and for the progress thread at several poll intervals.
#include <cblas.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../common/bench_args.h"
#include "comm/mpi/mpi_communicator.h"
#include "comm/mpi/mpi_runtime.h"
#include "comm/mpi/mpi_tuning.h"

namespace {

using moe4d::Communicator;
using moe4d::DType;
using moe4d::MpiCommunicator;
using moe4d::MpiOptions;
using nlohmann::json;

double now() { return MPI_Wtime(); }

struct Args {
  size_t max_bytes = size_t{64} << 20;
  int iters = 10;
  std::vector<size_t> overlap_bytes = {size_t{4} << 20, size_t{16} << 20, size_t{64} << 20};
  bool sweep = true;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char* key) { return moe4d::bench::flag_value(arg, key); };
    if (const char* v = value("--max-mib=")) {
      a.max_bytes = static_cast<size_t>(std::atof(v) * (1 << 20));
    } else if (const char* v = value("--iters=")) {
      a.iters = std::max(1, std::atoi(v));
    } else if (const char* v = value("--overlap-mib=")) {
      a.overlap_bytes.clear();
      for (const char* p = v; *p;) {
        a.overlap_bytes.push_back(static_cast<size_t>(std::atof(p) * (1 << 20)));
        p = std::strchr(p, ',');
        if (!p) break;
        ++p;
      }
    } else if (arg == "--no-sweep") {
      a.sweep = false;
    } else {
      std::fprintf(stderr, "comm_bench: unknown argument '%s'\n", arg.c_str());
      std::exit(2);
    }
  }
  return a;
}

// Best-of-`iters` time of fn (after warm-up), the slowest rank deciding each iteration.
double best_time(int iters, const std::function<void()>& fn) {
  for (int i = 0; i < 2; ++i) fn();
  double best = 1e30;
  for (int i = 0; i < iters; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    fn();
    double local = now() - t0, slowest = 0;
    MPI_Allreduce(&local, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    best = std::min(best, slowest);
  }
  return best;
}

json sweep(const Args& args, Communicator& fast, Communicator& polled) {
  int n = fast.size(), me = fast.rank();
  json rows = json::array();
  const char* ops[] = {"all_reduce", "reduce_scatter", "all_gather", "all_to_all_v"};
  for (const char* op : ops) {
    std::string name = op;
    double bus_factor = name == "all_reduce" ? 2.0 * (n - 1) / n : static_cast<double>(n - 1) / n;
    for (size_t bytes = 1024; bytes <= args.max_bytes; bytes *= 4) {
      size_t total = bytes / sizeof(float) / n * n;  // elements of the largest buffer, divisible by n
      size_t block = total / n;
      std::vector<float> a(total, 1.f), b(total, 0.f);
      std::vector<size_t> counts(n, block), displs(n);
      std::vector<int> icounts(n, static_cast<int>(block)), idispls(n);
      for (int r = 0; r < n; ++r) displs[r] = idispls[r] = static_cast<int>(r * block);
      int iters = bytes <= (size_t{1} << 20) ? args.iters * 5 : args.iters;

      auto via = [&](Communicator& c) -> std::function<void()> {
        if (name == "all_reduce") return [&] { c.all_reduce(a.data(), total); };
        if (name == "reduce_scatter") return [&] { c.reduce_scatter(a.data(), b.data(), block, DType::kF32); };
        if (name == "all_gather") return [&] { c.all_gather(a.data() + me * block, b.data(), block, DType::kF32); };
        return [&] {
          c.all_to_all_v(a.data(), counts.data(), displs.data(), b.data(), counts.data(), displs.data(), DType::kF32);
        };
      };
      std::function<void()> raw;
      int ib = static_cast<int>(block), it = static_cast<int>(total);
      if (name == "all_reduce")
        raw = [&] { MPI_Allreduce(MPI_IN_PLACE, a.data(), it, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); };
      else if (name == "reduce_scatter")
        raw = [&] { MPI_Reduce_scatter_block(a.data(), b.data(), ib, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); };
      else if (name == "all_gather")
        raw = [&] { MPI_Allgather(a.data() + me * block, ib, MPI_FLOAT, b.data(), ib, MPI_FLOAT, MPI_COMM_WORLD); };
      else
        raw = [&] {
          MPI_Alltoallv(a.data(), icounts.data(), idispls.data(), MPI_FLOAT, b.data(), icounts.data(), idispls.data(),
                        MPI_FLOAT, MPI_COMM_WORLD);
        };

      double t_raw = best_time(iters, raw);
      double t_comm = best_time(iters, via(fast));
      double t_polled = best_time(iters, via(polled));
      size_t size = total * sizeof(float);
      json row;
      if (name == "all_reduce") {
        // What OpenMPI's own iallreduce choice would cost (binomial for in-place / < 4 ranks).
        moe4d::set_mpi_control_variable("coll_libnbc_iallreduce_algorithm", 0);
        row["comm_library_default_algorithm_us"] = best_time(iters, via(fast)) * 1e6;
        moe4d::select_nbc_all_reduce_algorithm(MpiOptions{}.all_reduce_algorithm);
      }
      row.update(json{{"op", name},
                      {"bytes", size},
                      {"raw_mpi_us", t_raw * 1e6},
                      {"comm_us", t_comm * 1e6},
                      {"comm_polled_us", t_polled * 1e6},
                      {"ratio", t_comm / t_raw},
                      {"ratio_polled", t_polled / t_raw},
                      {"raw_busbw_gbps", size / t_raw * bus_factor / 1e9},
                      {"comm_busbw_gbps", size / t_comm * bus_factor / 1e9}});
      rows.push_back(row);
    }
  }
  return rows;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A square single-threaded SGEMM: the stand-in for backward compute.
struct Gemm {
  int n = 384;
  std::vector<float> a, b, c;
  Gemm() : a(n * n, 0.5f), b(n * n, 0.25f), c(n * n, 0.f) {}
  void run() { cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n); }
};

json overlap(const Args& args, int iters) {
  openblas_set_num_threads(1);
  Gemm gemm;
  double t_gemm = best_time(iters, [&] { gemm.run(); });
  struct Mode {
    std::string name;
    MpiOptions options;
  };
  std::vector<Mode> modes;
  modes.push_back({"polled_in_wait", MpiOptions{.progress_thread = false}});
  for (int us : {50, 200, 1000})
    modes.push_back({"progress_thread_" + std::to_string(us) + "us",
                     MpiOptions{.progress_thread = true,
                                .progress_min_bytes = 0,
                                .progress_poll_interval = std::chrono::microseconds(us)}});
  json rows = json::array();
  for (size_t bytes : args.overlap_bytes) {
    size_t count = bytes / sizeof(float);
    std::vector<float> data(count, 1.f);
    auto reference = MpiCommunicator::world(moe4d::CommOptions{}, MpiOptions{.progress_thread = false});
    double t_comm = best_time(iters, [&] { reference->all_reduce(data.data(), count); });
    // Size the compute to the all_reduce; re-calibrate once, since a single GEMM timing on a
    // shared machine is a poor predictor of a loop.
    int reps = std::max(1, static_cast<int>(t_comm / t_gemm + 0.5));
    double t_compute = 0;
    for (int attempt = 0; attempt < 2; ++attempt) {
      t_compute = best_time(iters, [&] {
        for (int i = 0; i < reps; ++i) gemm.run();
      });
      int rescaled = std::max(1, static_cast<int>(reps * t_comm / t_compute + 0.5));
      if (rescaled == reps) break;
      reps = rescaled;
    }
    t_compute = best_time(iters, [&] {
      for (int i = 0; i < reps; ++i) gemm.run();
    });
    for (const Mode& mode : modes) {
      auto comm = MpiCommunicator::world(moe4d::CommOptions{}, mode.options);
      // Per iteration (slowest rank): total, exposed (blocked in wait), compute, busy. Medians are
      // reported: on a shared machine single iterations swing by whole scheduler slices.
      std::vector<double> total, exposed, compute, busy;
      for (int i = 0; i < iters + 1; ++i) {
        comm->stats().clear();
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now();
        auto work = comm->all_reduce_async(data.data(), count, DType::kF32, moe4d::ReduceOp::kSum);
        for (int k = 0; k < reps; ++k) gemm.run();
        double t1 = now();
        work->wait();
        double t2 = now();
        double local[4] = {t2 - t0, t2 - t1, t1 - t0, comm->stats()[moe4d::CommOp::kAllReduce].busy_seconds};
        double slowest[4];
        MPI_Allreduce(local, slowest, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (i == 0) continue;  // warm-up
        total.push_back(slowest[0]);
        exposed.push_back(slowest[1]);
        compute.push_back(slowest[2]);
        busy.push_back(slowest[3]);
      }
      double exposed_ms = median(exposed) * 1e3, busy_ms = median(busy) * 1e3;
      rows.push_back({{"bytes", bytes},
                      {"mode", mode.name},
                      {"gemm_reps", reps},
                      {"comm_alone_ms", t_comm * 1e3},
                      {"compute_alone_ms", t_compute * 1e3},
                      {"compute_in_overlap_ms", median(compute) * 1e3},
                      {"total_ms", median(total) * 1e3},
                      {"busy_ms", busy_ms},
                      {"exposed_ms", exposed_ms},
                      {"exposed_fraction_of_comm_alone", exposed_ms / (t_comm * 1e3)},
                      {"exposed_fraction_of_busy", exposed_ms / busy_ms},
                      {"speedup_vs_serial", (t_comm + t_compute) / median(total)}});
    }
  }
  return rows;
}

}  // namespace

int main(int argc, char** argv) {
  moe4d::MpiRuntime mpi(&argc, &argv);
  Args args = parse(argc, argv);
  json out;
  {
    auto fast = MpiCommunicator::world(moe4d::CommOptions{});
    auto polled = MpiCommunicator::world(moe4d::CommOptions{}, MpiOptions{.progress_thread = false});
    out["benchmark"] = "comm_bench";
    out["ranks"] = fast->size();
    out["default_progress_min_bytes"] = MpiOptions{}.progress_min_bytes;
    out["default_progress_poll_us"] = MpiOptions{}.progress_poll_interval.count();
    if (args.sweep) out["sweep"] = sweep(args, *fast, *polled);
    out["overlap"] = overlap(args, std::max(3, args.iters / 2));
  }
  if (mpi.world_rank() == 0) std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
