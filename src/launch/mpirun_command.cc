#include "launch/mpirun_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace moe4d {

std::vector<std::string> mpirun_command(const LaunchPlan& plan, const MpirunOptions& options,
                                        const std::vector<std::string>& program) {
  std::vector<std::string> hosts;
  for (const std::string& h : plan.hosts) hosts.push_back(fmt::format("{}:{}", h, plan.local_worker_num));
  std::vector<std::string> argv = {options.mpirun,
                                   "-np",
                                   std::to_string(plan.worker_num),
                                   "--host",
                                   fmt::format("{}", fmt::join(hosts, ",")),
                                   "--map-by",
                                   "slot",
                                   "--bind-to",
                                   options.bind_core ? "core" : "none",
                                   "--tag-output"};
  if (options.oversubscribe) argv.push_back("--oversubscribe");
  argv.insert(argv.end(), options.mpi_args.begin(), options.mpi_args.end());
  argv.insert(argv.end(), program.begin(), program.end());
  return argv;
}

std::string shell_quote(const std::string& word) {
  if (word.empty()) return "''";
  bool plain = true;
  for (char c : word) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      std::string_view("@%_+=:,./-").find(c) != std::string_view::npos;
    plain = plain && safe;
  }
  if (plain) return word;
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

std::string shell_command(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& w : argv) {
    if (!out.empty()) out += ' ';
    out += shell_quote(w);
  }
  return out;
}

std::optional<std::string> mca_value(const std::string& name, const std::vector<std::string>& mpi_args,
                                     const McaEnvironment& env) {
  std::optional<std::string> value;
  for (size_t i = 0; i + 2 < mpi_args.size(); ++i) {
    const std::string& flag = mpi_args[i];
    const bool mca = flag == "--mca" || flag == "-mca" || flag == "--gmca" || flag == "-gmca";
    if (mca && mpi_args[i + 1] == name) value = mpi_args[i + 2];
  }
  if (value) return value;
  if (auto it = env.find(name); it != env.end()) return it->second;
  return std::nullopt;
}

}  // namespace moe4d
