// tests/comm/deadline_probe.cc — a job that must NOT finish normally: one rank fails to arrive at a
// collective, and the deadline machinery has to end the whole job non-zero, naming who is missing.
// Driven by expect_abort.cmake through CTest (see tests/comm/CMakeLists.txt).
//
// usage: mpirun -np 3 deadline_probe MODE TIMEOUT_SECONDS
//   sleep — the last rank sleeps far past the deadline before joining an all_reduce on its TP group
//   sleep_large — the same with a 4 MiB all_reduce, which runs on the progress thread until wait()
//   kill  — rank 1 is killed (SIGKILL) before the all_reduce
//   behind — the last rank sleeps; rank 1 waits for it in an all_reduce on a group of the two of
//           them (under a long deadline); rank 0 times out in a world all_reduce and must name
//           the sleeper as missing and rank 1 as blocked behind it
//   chain — the last rank sleeps; rank 1 waits for it in an all_reduce on the pair of them (same
//           deadline, entered 0.5 s later); rank 0 waits for rank 1 in an all_reduce on the
//           group of ranks 0 and 1 and times out first, finds rank 1 blocked behind someone, and must hold its report back so that
//           the job's report is rank 1's, naming the sleeper as missing
//   extended — rank 0 sleeps past the deadline before an all_reduce whose wait the others run
//           under a longer deadline (set_timeout_seconds, as a checkpoint save does): the job
//           must finish normally (exit 0)
//   recv  — rank 0 waits for a message that rank 1 sends only after sleeping past the deadline
//           (the other ranks sleep too: a rank that already called MPI_Finalize when another
//           aborts can crash OpenMPI 4.1's mpirun in PMIx_server_finalize, or hang it)
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "comm/mpi/mpi_communicator.h"
#include "comm/mpi/mpi_runtime.h"
#include "config/config.h"
#include "parallel/parallel_context.h"

int main(int argc, char** argv) {
  moe4d::MpiRuntime mpi(&argc, &argv);
  if (argc != 3) {
    std::fprintf(stderr, "usage: deadline_probe sleep|sleep_large|behind|chain|extended|kill|recv TIMEOUT_SECONDS\n");
    return 2;
  }
  std::string mode = argv[1];
  int rank = mpi.world_rank(), size = mpi.world_size();
  {
    moe4d::ParallelConfig config;
    config.tensor_parallel = size;
    config.collective_timeout = std::atof(argv[2]);
    auto ctx = moe4d::make_parallel_context(moe4d::MpiCommunicator::world(), config, size);
    float x = 1.f;
    if (mode == "sleep" || mode == "sleep_large") {
      std::vector<float> large(mode == "sleep" ? 1 : size_t{1} << 20, 1.f);
      if (rank == size - 1) std::this_thread::sleep_for(std::chrono::seconds(120));
      ctx->tp->all_reduce(large.data(), large.size());
    } else if (mode == "behind") {
      auto pair = ctx->world->split(rank >= 1 ? 0 : -1, rank, "pair");
      if (pair) pair->set_timeout_seconds(600);
      if (rank == size - 1) std::this_thread::sleep_for(std::chrono::seconds(120));
      if (rank >= 1) pair->all_reduce(&x, 1);
      ctx->world->all_reduce(&x, 1);
    } else if (mode == "chain") {
      auto head = ctx->world->split(rank <= 1 ? 0 : -1, rank, "head");
      auto pair = ctx->world->split(rank >= 1 ? 0 : -1, rank, "pair");
      if (rank == size - 1) std::this_thread::sleep_for(std::chrono::seconds(120));
      if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(500));
      if (rank >= 1) pair->all_reduce(&x, 1);
      if (rank <= 1) head->all_reduce(&x, 1);
    } else if (mode == "extended") {
      const double step_timeout = ctx->world->timeout_seconds();
      ctx->world->set_timeout_seconds(60);
      if (rank == 0) std::this_thread::sleep_for(std::chrono::duration<double>(2 * step_timeout));
      ctx->world->all_reduce(&x, 1);
      ctx->world->set_timeout_seconds(step_timeout);
      ctx->world->barrier();
      if (rank == 0) std::printf("deadline_probe: the extended deadline held\n");
      return 0;
    } else if (mode == "kill") {
      if (rank == 1) std::raise(SIGKILL);
      ctx->tp->all_reduce(&x, 1);
    } else if (mode == "recv") {
      if (rank == 0) ctx->world->recv(&x, 1, moe4d::DType::kF32, 1, 0);
      if (rank != 0) std::this_thread::sleep_for(std::chrono::seconds(120));
      if (rank == 1) ctx->world->send(&x, 1, moe4d::DType::kF32, 0, 0);
    } else {
      std::fprintf(stderr, "deadline_probe: unknown mode '%s'\n", mode.c_str());
      return 2;
    }
  }
  std::printf("deadline_probe: the job finished normally, which it must not\n");
  return 0;
}
