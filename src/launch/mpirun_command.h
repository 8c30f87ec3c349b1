// launch/mpirun_command.h — the exact `mpirun` command line of a launch, and OpenMPI's MCA settings.
//
// moe4d launch does not manage processes itself: OpenMPI's mpirun starts the ranks (over its remote
// shell, plm_rsh_agent), forwards signals and ends the job when a rank dies. The command built here
// places the ranks as LaunchPlan says (--host h1:L,h2:L,... --map-by slot), tags every output line
// with its rank (--tag-output, which the supervisor demultiplexes into per-rank logs) and appends
// the user's --mpi-arg arguments last, so that they can override anything before them.
// MCA parameters are looked up the way mpirun resolves them: a `--mca NAME VALUE` (or -mca, --gmca)
// in the user's arguments wins over OMPI_MCA_NAME in the environment. Pure functions; thread-safe.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "launch/launch_plan.h"

namespace moe4d {

struct MpirunOptions {
  std::string mpirun = "mpirun";
  bool bind_core = false;              // --bind-to core (msrun --bind_core); else --bind-to none
  bool oversubscribe = false;
  std::vector<std::string> mpi_args;   // passed through, after everything moe4d adds
};

// argv of the mpirun command; `program` is the command each rank runs (absolute moe4d path first).
std::vector<std::string> mpirun_command(const LaunchPlan& plan, const MpirunOptions& options,
                                        const std::vector<std::string>& program);

// Quotes one word for a POSIX shell (unchanged when it needs no quoting).
std::string shell_quote(const std::string& word);
// The words joined with spaces, each shell-quoted: a command line a user can paste.
std::string shell_command(const std::vector<std::string>& argv);

// OMPI_MCA_* variables of the environment, by parameter name (without the prefix).
using McaEnvironment = std::map<std::string, std::string>;

// Value of MCA parameter `name` for this launch: the last --mca/-mca/--gmca NAME VALUE in
// `mpi_args`, else OMPI_MCA_NAME from `env`; nullopt when neither sets it.
std::optional<std::string> mca_value(const std::string& name, const std::vector<std::string>& mpi_args,
                                     const McaEnvironment& env);

}  // namespace moe4d
