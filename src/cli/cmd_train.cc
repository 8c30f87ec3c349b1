// cli/cmd_train.cc — `mpirun -np N moe4d train CONFIG.yaml`: start MPI, build the rank grid and the
// process groups from parallel_config, and run the Trainer.
#include <cblas.h>
#ifdef MOE4D_HAVE_OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <new>
#include <stdexcept>
#include <string>

#include "checkpoint/checkpoint.h"
#include "cli/commands.h"
#include "cli/host_load.h"
#include "cli/train_preflight.h"
#include "cli/stop_signals.h"
#include "cli/train_banner.h"
#include "cli/train_setup.h"
#include "comm/mpi/mpi_communicator.h"
#include "comm/mpi/mpi_runtime.h"
#include "config/config_loader.h"
#include "core/error.h"
#include "core/log.h"
#include "report/run_report.h"
#include "train/trainer.h"

namespace moe4d {
namespace {

struct TrainArgs {
  std::string config;
  bool resume = false;
  bool resume_strict = false;
  bool start_over = false;
  std::string resume_from;
  int exit_after = 0;
  int blas_threads = 1;
  std::string metrics;
  bool quiet = false;
  std::string log_format = "text";
  std::vector<std::string> overrides;  // --set KEY=VALUE
};

// One error line from the rank that failed; other ranks are ended with it.
int fail_run(const MpiRuntime& mpi, const std::string& message) {
  if (mpi.world_size() > 1)
    std::fprintf(stderr, "moe4d: error (rank %d): %s\n", mpi.world_rank(), message.c_str());
  else
    std::fprintf(stderr, "moe4d: error: %s\n", message.c_str());
  std::fflush(stderr);
  if (mpi.world_size() > 1) mpi.abort_job(2);
  return 2;
}

std::string out_of_memory_message(const Config& config, const char* phase, const std::string& what) {
  std::string estimate;
  try {
    estimate = fmt::format(" (the planner estimates {:.2f} GiB per rank for {})",
                           config_memory_per_rank(config).total() / (1024.0 * 1024.0 * 1024.0), config.source);
  } catch (const std::exception&) {
  }
  return fmt::format("{} while {}{}; lower the sizes or spread the model over more ranks", what, phase, estimate);
}

// This machine's memory for one rank: ranks per node from parallel_config.local_worker_num or the
// world's node topology, and the smallest figure over all ranks, so every rank reaches one verdict.
RankMemory job_memory_per_rank(const Config& config, Communicator& world) {
  int ranks_per_node = config.parallel.local_worker_num;
  if (ranks_per_node <= 0) ranks_per_node = world.split_node("node")->size();
  // A local_worker_num above the world size cannot share one node's memory more thinly than that.
  RankMemory memory = this_machine_memory(std::min(ranks_per_node, std::max(1, config.parallel.world_size())));
  double smallest = memory.bytes;
  world.all_reduce(&smallest, 1, DType::kF64, ReduceOp::kMin);
  if (smallest < memory.bytes) memory.description += ", less on another node of the job";
  memory.bytes = smallest;
  return memory;
}

int run_train(const TrainArgs& args) {
  MpiRuntime mpi(nullptr, nullptr);
  set_log_rank(mpi.world_rank(), mpi.world_size());
  // Installed before set-up, so that a stop asked for during it (SIGUSR1 from `moe4d launch` would
  // otherwise kill the rank) stops after the first step.
  const std::atomic<int>& stop_signal = install_stop_signal_handlers(mpi.world_size() == 1);
  // The world first: the set-up check measures the job's memory over it (its deadline becomes
  // parallel_config.collective_timeout below).
  std::unique_ptr<Communicator> world = MpiCommunicator::world(CommOptions{});
  Config config;
  TrainPreflight preflight;
  // Set-up errors are the same on every rank (same files, same arithmetic): rank 0 reports them and
  // every rank exits cleanly. Errors after set-up may be rank-specific and abort the whole job.
  try {
    config = load_config(args.config, args.overrides);
    preflight = preflight_train(config, mpi.world_size(), job_memory_per_rank(config, *world));
  } catch (const Error& e) {
    if (mpi.world_rank() == 0) std::fprintf(stderr, "moe4d: error: %s\n", e.what());
    return 2;
  }
  // What is being allocated, for the message when an allocation fails (std::bad_alloc).
  const char* phase = "setting up the ranks";
  try {
    openblas_set_num_threads(args.blas_threads);
#ifdef MOE4D_HAVE_OPENMP
    omp_set_num_threads(args.blas_threads);  // oneDNN's 16-bit GEMMs run on OpenMP threads
#endif
    world->set_timeout_seconds(config.parallel.collective_timeout);
    const int ranks_per_node =
        config.parallel.local_worker_num > 0 ? config.parallel.local_worker_num : world->detect_ranks_per_node();
    auto pc = make_parallel_context(std::move(world), config.parallel, ranks_per_node);
    const nlohmann::json oversubscription = detect_oversubscription(*pc->world, args.blas_threads);
    if (pc->rank == 0 && !oversubscription.is_null())
      for (const auto& h : oversubscription["oversubscription"]["hosts"])
        log_warn("oversubscribed: {} ranks x {} BLAS thread(s) on {} cores of host {}: ranks take turns on the "
                 "cores, so step times are slower and the exposed communication in step_time.svg is mostly waiting "
                 "for a CPU, not for a peer (recorded in the metrics; time.rank_descheduled_s measures it)",
                 h["ranks"].get<int>(), args.blas_threads, h["cores"].get<int>(), h["host"].get<std::string>());
    const std::string metrics_path = metrics_path_of(config, args.metrics);
    TrainerOptions options_t{.resume_from = args.resume_from, .exit_after = args.exit_after, .quiet = args.quiet,
                             .metrics_path = metrics_path, .stop_signal = &stop_signal,
                             .json_progress = args.log_format == "json",
                             .run_facts = oversubscription,
                             .descheduled_seconds = thread_runqueue_wait_seconds};
    // The run directory is rank 0's to judge (refuse a used one, move it aside, find the resume
    // point); every rank learns the outcome, and a refusal ends every rank cleanly.
    int64_t outcome[2] = {0, -1};  // {refused, resume step}
    std::string refusal;
    if (pc->rank == 0) {
      try {
        outcome[1] = prepare_run_dir(config, metrics_path,
                                     {.resume = args.resume, .resume_strict = args.resume_strict,
                                      .resume_from = args.resume_from, .start_over = args.start_over,
                                      .tokenizer = &preflight.tokenizer})
                         .resume_step;
      } catch (const Error& e) {
        refusal = e.what();
        outcome[0] = 1;
      }
    }
    pc->world->broadcast(outcome, 2, DType::kI64, 0);
    if (outcome[0]) {
      if (pc->rank == 0) std::fprintf(stderr, "moe4d: error: %s\n", refusal.c_str());
      return 2;
    }
    if (outcome[1] >= 0) options_t.resume_from = config.checkpoint.dir + "/" + checkpoint_dir_name(outcome[1]);
    if (pc->rank == 0) log_train_start(config, preflight, args.quiet);
    phase = "allocating the model's parameters, gradients, optimizer state and step buffers";
    Trainer trainer(config, *pc, options_t);
    phase = "training (activations and communication buffers of a step)";
    trainer.run();
    // A requested stop is no failure: said once (rank 0) before the pictures, so that the line is
    // out even if a launcher's grace period ends while they are drawn; the exit status is 0.
    if (trainer.stopped_by_signal() && pc->rank == 0)
      log_info("stopped by {} after step {} of {}; {}", stop_signal_name(trainer.stopped_by_signal()), trainer.step(),
               config.train.steps,
               trainer.last_checkpoint().empty()
                   ? std::string("no checkpoint written (checkpoint.dir is empty)")
                   : "checkpoint " + trainer.last_checkpoint() + " (continue with --resume)");
    phase = "writing the run report";
    if (pc->rank == 0 && std::filesystem::is_regular_file(trainer.metrics_path())) {  // pictures next to the metrics
      const std::string dir = std::filesystem::path(trainer.metrics_path()).parent_path().string();
      // The training succeeded: a report that cannot be drawn is a warning, never the exit status.
      try {
        const auto files = write_run_report(trainer.metrics_path(), dir.empty() ? "." : dir);
        if (!args.quiet) log_info("{} pictures of the run in {}/ (index.html shows them all)", files.size(),
                                  dir.empty() ? "." : dir);
      } catch (const Error& e) {
        log_warn("training {}, but the pictures of the run were not drawn: {}",
                 trainer.stopped_by_signal() ? "stopped" : "finished", e.what());
      }
    }
    // Ending inside a streak of non-finite steps (shorter than train.max_nonfinite_steps) is a failed
    // run, not a finished one: the final state is not finite and was not checkpointed. Every rank
    // knows the streak, so all return the error without an abort.
    if (trainer.nonfinite_streak() > 0) {
      if (pc->rank == 0)
        std::fprintf(stderr,
                     "moe4d: error: training ended after step %lld with the loss or the gradients non-finite for the "
                     "last %d step(s) (fewer than train.max_nonfinite_steps %d, so it was not stopped earlier); no "
                     "checkpoint was written during them; %s\n",
                     static_cast<long long>(trainer.step()), trainer.nonfinite_streak(),
                     config.train.max_nonfinite_steps,
                     trainer.last_checkpoint().empty()
                         ? "this run wrote no checkpoint before them"
                         : ("the newest checkpoint, " + trainer.last_checkpoint() + ", is the last good state").c_str());
      return 2;
    }
  } catch (const Error& e) {
    return fail_run(mpi, e.what());
  } catch (const std::bad_alloc&) {
    return fail_run(mpi, out_of_memory_message(config, phase, "out of memory"));
  } catch (const std::length_error& e) {
    return fail_run(mpi, out_of_memory_message(config, phase, fmt::format("a size too large to allocate ({})", e.what())));
  }
  return 0;
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand("train", "train a model (launch with mpirun -np N for parallel layouts)");
  cmd->add_option("config", args->config, "YAML config (docs/config.md)")->required();
  CLI::Option* resume = cmd->add_flag(
      "--resume", args->resume,
      "continue the run in checkpoint.dir from its newest checkpoint that verifies (latest, else the newest step "
      "directory); starts at step 0 only if it holds none");
  CLI::Option* resume_strict = cmd->add_flag(
      "--resume-strict", args->resume_strict,
      "like --resume, but refuse to start when checkpoint.dir holds no checkpoint (a mistyped dir is an error)");
  resume_strict->excludes(resume);
  cmd->add_flag("--start-over", args->start_over,
                "checkpoint.dir already holds a run: move it aside to <dir>.old-<time> (nothing is deleted) and "
                "start fresh")
      ->excludes(resume)
      ->excludes(resume_strict);
  cmd->add_option("--resume-from", args->resume_from, "continue from this checkpoint (step dir or checkpoint dir)")
      ->excludes("--start-over");
  cmd->add_option("--exit-after", args->exit_after,
                  "for planned interruptions: stop after this many steps of this run, writing a checkpoint (the "
                  "schedule still uses train.steps)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--blas-threads", args->blas_threads, "BLAS threads per rank (default 1)")->check(CLI::PositiveNumber);
  cmd->add_option("--metrics", args->metrics, "JSONL metrics file (default: train.metrics_file)");
  cmd->add_option("--set", args->overrides,
                  "KEY=VALUE: override a config key before it is checked, e.g. --set train.lr=3e-4 (repeatable; "
                  "recorded in the checkpoints' config)")
      ->allow_extra_args(false);
  cmd->add_flag("--quiet", args->quiet, "no per-step progress lines");
  cmd->add_option("--log-format", args->log_format, "progress lines as text (default) or json (one object per line)")
      ->check(CLI::IsMember({"text", "json"}));
  cmd->callback([args] {
    const int code = run_train(*args);
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace moe4d
