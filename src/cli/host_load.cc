// cli/host_load.cc — oversubscription from the affinity masks, run-queue wait from schedstat.
#include "cli/host_load.h"

#include <sched.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

namespace moe4d {

nlohmann::json detect_oversubscription(Communicator& world, int blas_threads) {
  const std::unique_ptr<Communicator> node = world.split_node("node");
  const int ranks = node->size();
  cpu_set_t mine, all;
  CPU_ZERO(&mine);
  if (::sched_getaffinity(0, sizeof(mine), &mine) != 0) {  // unknown: every core the machine has
    const unsigned n = std::max(1u, std::thread::hardware_concurrency());
    for (unsigned c = 0; c < n && c < CPU_SETSIZE; ++c) CPU_SET(c, &mine);
  }
  // The union of the node's masks (gathered: the interface reduces numbers, not bits).
  std::vector<cpu_set_t> masks(static_cast<size_t>(ranks));
  node->all_gather(&mine, masks.data(), sizeof(cpu_set_t), DType::kU8);
  CPU_ZERO(&all);
  for (cpu_set_t& mask : masks) CPU_OR(&all, &all, &mask);
  struct Host {
    int ranks, cores;
    char name[64];
  } me{ranks, CPU_COUNT(&all), {0}};
  ::gethostname(me.name, sizeof(me.name) - 1);
  std::vector<Host> hosts(static_cast<size_t>(world.size()));
  world.all_gather(&me, hosts.data(), sizeof(Host), DType::kU8);
  nlohmann::json over = nlohmann::json::array();
  std::vector<std::string> seen;
  for (const Host& h : hosts) {
    const std::string name(h.name, strnlen(h.name, sizeof(h.name)));
    if (std::find(seen.begin(), seen.end(), name) != seen.end()) continue;
    seen.push_back(name);
    const int threads = h.ranks * std::max(1, blas_threads);
    if (threads > h.cores)
      over.push_back({{"host", name}, {"ranks", h.ranks}, {"threads", threads}, {"cores", h.cores}});
  }
  if (over.empty()) return nullptr;
  return {{"oversubscription", {{"hosts", over}}}};
}

double thread_runqueue_wait_seconds() {
  // "<ns on a CPU> <ns waiting on a run queue> <time slices>"
  std::ifstream file("/proc/thread-self/schedstat");
  long long on_cpu = 0, waiting = 0;
  if (!(file >> on_cpu >> waiting)) return std::nan("");
  return double(waiting) * 1e-9;
}

}  // namespace moe4d
