// core/log.h — rank-prefixed logging to stderr.
//
// The rank prefix is the only process-wide logging state; the CLI sets it once after MPI starts
// (set_log_rank). Everything else a component needs is passed to it explicitly.
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace moe4d {

void set_log_rank(int rank, int world_size);
int log_rank();
void log_line(std::string_view level, std::string_view message);

template <typename... Args>
void log_info(fmt::format_string<Args...> format, Args&&... args) {
  log_line("info", fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
void log_warn(fmt::format_string<Args...> format, Args&&... args) {
  log_line("WARNING", fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace moe4d
