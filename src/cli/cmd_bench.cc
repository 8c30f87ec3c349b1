// cli/cmd_bench.cc — `mpirun -np N moe4d bench [--output FILE] [--quick]`: measure this machine
// (machine/machine_bench.h) and write the cluster file `moe4d plan MODEL FILE` reads.
//
// Every rank measures at once (that is how training uses the machine); world rank 0 prints the
// progress lines and writes the files. BLAS runs one thread per rank, as in `moe4d train`.
#include <cblas.h>

#include <cstdio>

#include "cli/commands.h"
#include "comm/mpi/mpi_communicator.h"
#include "comm/mpi/mpi_runtime.h"
#include "core/error.h"
#include "core/log.h"
#include "data/atomic_file.h"
#include "machine/machine_bench.h"
#include "plan/cluster_yaml.h"

namespace moe4d {
namespace {

struct BenchArgs {
  std::string output = "this_machine.yaml";
  std::string details;
  bool quick = false;
};

int run_bench(const BenchArgs& args) {
  MpiRuntime mpi(nullptr, nullptr);
  set_log_rank(mpi.world_rank(), mpi.world_size());
  try {
    openblas_set_num_threads(1);
    auto world = MpiCommunicator::world();
    MachineBenchOptions options;
    options.quick = args.quick;
    options.progress = [](const std::string& line) { log_info("{}", line); };
    const MachineBenchResult result = run_machine_bench(*world, options);
    if (world->rank() == 0) {
      write_file_atomically(args.output, cluster_to_yaml(result.cluster));
      if (!args.details.empty()) write_file_atomically(args.details, result.details.dump(2) + "\n");
      log_info("wrote {} (moe4d plan MODEL {}){}", args.output, args.output,
               args.details.empty() ? "" : ", measurements in " + args.details);
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "moe4d: error (rank %d): %s\n", mpi.world_rank(), e.what());
    std::fflush(stderr);
    if (mpi.world_size() > 1) mpi.abort_job(2);
    return 2;
  }
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "measure this machine's GEMM, memory and collective speeds and write the cluster file moe4d plan "
               "reads (launch with mpirun -np N, one rank per core)");
  cmd->add_option("--output", args->output, "cluster YAML to write")->capture_default_str();
  cmd->add_option("--details", args->details, "also write every measurement and fit as JSON to this file");
  cmd->add_flag("--quick", args->quick, "a few small shapes and messages: seconds instead of minutes, rough numbers");
  cmd->callback([args] {
    const int code = run_bench(*args);
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace moe4d
