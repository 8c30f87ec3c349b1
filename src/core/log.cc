#include "core/log.h"

#include <atomic>
#include <cstdio>

namespace moe4d {
namespace {
std::atomic<int> g_rank{-1};
std::atomic<int> g_world{1};
}  // namespace

void set_log_rank(int rank, int world_size) {
  g_rank = rank;
  g_world = world_size;
}

int log_rank() { return g_rank; }

void log_line(std::string_view level, std::string_view message) {
  std::string line = g_world > 1 ? fmt::format("[moe4d rank {}] {}: {}\n", g_rank.load(), level, message)
                                 : fmt::format("[moe4d] {}: {}\n", level, message);
  std::fputs(line.c_str(), stderr);
}

}  // namespace moe4d
