// cli/cmd_train.cc — `mpirun -np N moe4d train CONFIG.yaml`: start MPI, build the rank grid and the
// process groups from parallel_config, and run the Trainer.
#include <cblas.h>
#ifdef MOE4D_HAVE_OPENMP
#include <omp.h>
#endif

#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "comm/mpi_communicator.h"
#include "comm/mpi_runtime.h"
#include "config/config_loader.h"
#include "core/error.h"
#include "core/log.h"
#include "parallel/layout_check.h"
#include "report/run_report.h"
#include "train/feature_gate.h"
#include "train/trainer.h"

namespace moe4d {
namespace {

struct TrainArgs {
  std::string config;
  bool resume = false;
  std::string resume_from;
  int exit_after = 0;
  int blas_threads = 1;
  std::string metrics;
  bool quiet = false;
  std::string log_format = "text";
};

int run_train(const TrainArgs& args) {
  MpiRuntime mpi(nullptr, nullptr);
  set_log_rank(mpi.world_rank(), mpi.world_size());
  Config config;
  // Set-up errors are the same on every rank (same files, same arithmetic): rank 0 reports them and
  // every rank exits cleanly. Errors after set-up may be rank-specific and abort the whole job.
  try {
    config = load_config(args.config);
    validate_layout(config.model, config.parallel, config.train.global_batch_size, mpi.world_size());
    check_training_support(config);
  } catch (const Error& e) {
    if (mpi.world_rank() == 0) std::fprintf(stderr, "moe4d: error: %s\n", e.what());
    return 2;
  }
  try {
    openblas_set_num_threads(args.blas_threads);
#ifdef MOE4D_HAVE_OPENMP
    omp_set_num_threads(args.blas_threads);  // oneDNN's 16-bit GEMMs run on OpenMP threads
#endif
    CommOptions options{.timeout_seconds = config.parallel.collective_timeout};
    auto world = MpiCommunicator::world(options);
    const int ranks_per_node =
        config.parallel.local_worker_num > 0 ? config.parallel.local_worker_num : world->detect_ranks_per_node();
    auto pc = make_parallel_context(std::move(world), config.parallel, ranks_per_node);
    TrainerOptions options_t{.resume_from = args.resume_from, .exit_after = args.exit_after, .quiet = args.quiet,
                             .metrics_path = args.metrics, .json_progress = args.log_format == "json"};
    if (args.resume && options_t.resume_from.empty()) {
      if (config.checkpoint.dir.empty()) fail("--resume needs checkpoint.dir in {}", args.config);
      if (std::filesystem::exists(config.checkpoint.dir + "/latest")) options_t.resume_from = config.checkpoint.dir;
      else if (pc->rank == 0) log_warn("--resume: no checkpoint in {} yet, starting from step 0", config.checkpoint.dir);
    }
    if (pc->rank == 0 && !args.quiet)
      log_info("{} ranks: dp {} x ep {} x tp {} x pp {}, micro_batch_num {}", pc->grid.world_size(), pc->dp_size(),
               pc->ep_size(), pc->tp_size(), pc->pp_size(), config.parallel.micro_batch_num);
    Trainer trainer(config, *pc, options_t);
    trainer.run();
    if (pc->rank == 0 && std::filesystem::is_regular_file(trainer.metrics_path())) {  // pictures next to the metrics
      const std::string dir = std::filesystem::path(trainer.metrics_path()).parent_path().string();
      const auto files = write_run_report(trainer.metrics_path(), dir.empty() ? "." : dir);
      if (!args.quiet) log_info("{} pictures of the run in {}/ (index.html shows them all)", files.size(),
                                dir.empty() ? "." : dir);
    }
  } catch (const Error& e) {
    if (mpi.world_size() > 1)
      std::fprintf(stderr, "moe4d: error (rank %d): %s\n", mpi.world_rank(), e.what());
    else
      std::fprintf(stderr, "moe4d: error: %s\n", e.what());
    std::fflush(stderr);
    if (mpi.world_size() > 1) MPI_Abort(MPI_COMM_WORLD, 2);
    return 2;
  }
  return 0;
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand("train", "train a model (launch with mpirun -np N for parallel layouts)");
  cmd->add_option("config", args->config, "YAML config (design.md §5)")->required();
  cmd->add_flag("--resume", args->resume, "continue from the latest checkpoint in checkpoint.dir, if any");
  cmd->add_option("--resume-from", args->resume_from, "continue from this checkpoint (step dir or checkpoint dir)");
  cmd->add_option("--exit-after", args->exit_after, "stop after this many steps of this run (the schedule still "
                  "uses train.steps); for planned interruptions")->check(CLI::NonNegativeNumber);
  cmd->add_option("--blas-threads", args->blas_threads, "BLAS threads per rank (default 1)")->check(CLI::PositiveNumber);
  cmd->add_option("--metrics", args->metrics, "JSONL metrics file (default: train.metrics_file)");
  cmd->add_flag("--quiet", args->quiet, "no per-step progress lines");
  cmd->add_option("--log-format", args->log_format, "progress lines as text (default) or json (one object per line)")
      ->check(CLI::IsMember({"text", "json"}));
  cmd->callback([args] {
    const int code = run_train(*args);
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace moe4d
