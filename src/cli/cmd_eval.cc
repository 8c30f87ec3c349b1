// cli/cmd_eval.cc — `[mpirun -np N] moe4d eval CHECKPOINT --data SHARD [--batches N]`: mean token
// cross-entropy and perplexity of a checkpoint on fixed windows of a token shard, through the
// trainer's own validation path (Trainer::evaluate: windows spread evenly over the shard, split over
// the data replicas) in any parallel layout.
#include <cblas.h>

#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "checkpoint/checkpoint.h"
#include "cli/commands.h"
#include "cli/train_setup.h"
#include "comm/mpi/mpi_communicator.h"
#include "comm/mpi/mpi_runtime.h"
#include "config/config_loader.h"
#include "core/error.h"
#include "core/log.h"
#include "data/window_sampler.h"
#include "parallel/layout_check.h"
#include "train/trainer.h"

namespace moe4d {
namespace {

struct EvalArgs {
  std::string checkpoint;
  std::string data;
  int batches = 0;
  int dp = 0, ep = 0, tp = 0, pp = 0;
  int micro_batch_num = 0;
  bool dropless = false;
  bool json = false;
  std::vector<std::string> overrides;  // --set KEY=VALUE on the checkpoint's config
};

// The layout: the flags, else the checkpoint config's when it fits the world, else all data parallel.
void choose_layout(const EvalArgs& args, int world, ParallelConfig& p) {
  const bool given = args.dp || args.ep || args.tp || args.pp;
  if (given) {
    p.data_parallel = args.dp ? args.dp : 1;
    p.expert_parallel = args.ep ? args.ep : 1;
    p.tensor_parallel = args.tp ? args.tp : 1;
    p.pipeline_parallel = args.pp ? args.pp : 1;
    p.stage_layers.clear();
    p.device_list.clear();
  } else if (p.world_size() != world) {
    p = ParallelConfig{};
    p.data_parallel = world;
  }
  if (args.micro_batch_num) p.micro_batch_num = args.micro_batch_num;
  if (p.pipeline_parallel > 1 && p.micro_batch_num < p.pipeline_parallel) p.micro_batch_num = p.pipeline_parallel;
  if (p.pipeline_parallel == 1 && p.pipeline_schedule == PipelineSchedule::kInterleaved) p.virtual_pipeline = 1;
}

int run_eval(const EvalArgs& args) {
  MpiRuntime mpi(nullptr, nullptr);
  set_log_rank(mpi.world_rank(), mpi.world_size());
  Config config;
  int64_t windows = 0;
  try {
    const Checkpoint checkpoint = Checkpoint::open(args.checkpoint);
    const nlohmann::json state = checkpoint.json("state.json");
    if (!state.contains("config") || !state["config"].is_string())
      fail("checkpoint {}: state.json has no config", checkpoint.path());
    config = parse_config(state["config"].get<std::string>(), checkpoint.path() + "/state.json", args.overrides);
    config.data.valid = args.data;
    config.train.init_from = checkpoint.path();
    if (args.batches > 0) config.train.eval_batches = args.batches;
    config.checkpoint.dir.clear();
    config.train.metrics_file.clear();
    if (args.dropless) config.model.moe.capacity_factor.reset();
    choose_layout(args, mpi.world_size(), config.parallel);
    validate_layout(config.model, config.parallel, config.train.global_batch_size, mpi.world_size());
    const TokenDataset data = TokenDataset::open(args.data);
    if (data.vocab_size() > config.model.vocab_size)
      fail("{}: the token shard has vocab_size {}, larger than the model's {}", args.data, data.vocab_size(),
           config.model.vocab_size);
    // Ids of another tokenizer would give a meaningless loss: the shard's must be the checkpoint's.
    if (data.header().tokenizer_identity)
      check_checkpoint_tokenizer(checkpoint.path(), *data.header().tokenizer_identity,
                                 fmt::format("--data {} was made with", data.paths().json));
    windows = int64_t(config.train.eval_batches) * config.train.global_batch_size;
    if (windows > max_eval_windows(data, config.model.seq_length) && mpi.world_rank() == 0)
      log_warn("{} windows of {} tokens overlap in {} ({} fit without overlap)", windows, config.model.seq_length,
               args.data, max_eval_windows(data, config.model.seq_length));
    if (config.model.moe.capacity_factor && mpi.world_rank() == 0)
      log_warn("the model drops tokens over capacity (capacity_factor {}) in evaluation too; --dropless evaluates "
               "without dropping",
               *config.model.moe.capacity_factor);
  } catch (const Error& e) {
    if (mpi.world_rank() == 0) std::fprintf(stderr, "moe4d: error: %s\n", e.what());
    return 2;
  }
  try {
    openblas_set_num_threads(1);
    CommOptions options{.timeout_seconds = config.parallel.collective_timeout};
    auto world = MpiCommunicator::world(options);
    const int ranks_per_node =
        config.parallel.local_worker_num > 0 ? config.parallel.local_worker_num : world->detect_ranks_per_node();
    auto pc = make_parallel_context(std::move(world), config.parallel, ranks_per_node);
    Trainer trainer(config, *pc, TrainerOptions{.quiet = true, .evaluation_only = true});
    const double loss = trainer.evaluate();
    if (pc->rank == 0) {
      const nlohmann::json result = {{"checkpoint", args.checkpoint},
                                     {"data", args.data},
                                     {"loss", loss},
                                     {"perplexity", std::exp(loss)},
                                     {"windows", windows},
                                     {"seq_length", config.model.seq_length},
                                     {"tokens", windows * config.model.seq_length},
                                     {"layout",
                                      {{"data_parallel", pc->dp_size()},
                                       {"expert_parallel", pc->ep_size()},
                                       {"tensor_parallel", pc->tp_size()},
                                       {"pipeline_parallel", pc->pp_size()}}}};
      if (args.json)
        fmt::print("{}\n", result.dump());
      else
        fmt::print("eval: loss {:.6f} | perplexity {:.4f} | {} windows x {} tokens | dp {} x ep {} x tp {} x pp {}\n",
                   loss, std::exp(loss), windows, config.model.seq_length, pc->dp_size(), pc->ep_size(),
                   pc->tp_size(), pc->pp_size());
      std::fflush(stdout);
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "moe4d: error: %s\n", e.what());
    std::fflush(stderr);
    if (mpi.world_size() > 1) mpi.abort_job(2);
    return 2;
  }
  return 0;
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto args = std::make_shared<EvalArgs>();
  CLI::App* cmd = app.add_subcommand("eval", "cross-entropy and perplexity of a checkpoint on a token shard "
                                             "(launch with mpirun -np N for parallel layouts)");
  cmd->add_option("checkpoint", args->checkpoint, "checkpoint step directory, or checkpoint dir (follows latest)")
      ->required();
  cmd->add_option("--data", args->data, "token shard (.bin written by moe4d prepare)")->required();
  cmd->add_option("--batches", args->batches,
                  "global batches of fixed windows (default: train.eval_batches of the checkpoint's config)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--dp", args->dp, "data parallel size (default: the checkpoint's layout if it fits the ranks, "
                                    "else all ranks data parallel)")->check(CLI::PositiveNumber);
  cmd->add_option("--ep", args->ep, "expert parallel size")->check(CLI::PositiveNumber);
  cmd->add_option("--tp", args->tp, "tensor parallel size")->check(CLI::PositiveNumber);
  cmd->add_option("--pp", args->pp, "pipeline parallel size")->check(CLI::PositiveNumber);
  cmd->add_option("--micro-batch-num", args->micro_batch_num, "micro-batches per replica per batch")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--dropless", args->dropless, "evaluate without capacity dropping (capacity_factor null)");
  cmd->add_flag("--json", args->json, "print the result as one JSON object");
  cmd->add_option("--set", args->overrides,
                  "KEY=VALUE: override a key of the checkpoint's config before it is checked, e.g. --set "
                  "parallel_config.tensor_parallel=2 (repeatable; the layout flags above win)")
      ->allow_extra_args(false);
  cmd->callback([args] {
    const int code = run_eval(*args);
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace moe4d
