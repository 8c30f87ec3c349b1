// bench/data/shard_verify_bench.cc — the cost of verifying a token shard when it is opened. Prints
// one JSON document.
//
// usage: shard_verify_bench [--mib=256]
//   Writes a uint16 shard of MiB mebibytes of random ids (vocab 50257) into a temporary directory
//   (so it is in the page cache: the figures are CPU cost, not disk speed), then times, each as the
//   best of 3 and as seconds per GiB:
//     sha256      the hash alone (OpenSSL);
//     id_scan     the id < vocab_size scan alone;
//     one_pass    scan_token_payload: both, 1 MiB chunk by chunk (what open runs);
//     open_first  TokenDataset::open of a shard without a verified marker (mmap + one_pass);
//     open_marked TokenDataset::open once the marker is there (no pass).
#include <sys/stat.h>
#include <utime.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/sha256.h"
#include "data/token_dataset.h"
#include "data/token_shard_format.h"
#include "data/token_shard_writer.h"

namespace {

using Clock = std::chrono::steady_clock;

template <typename F>
double best_of_3(F&& body) {
  double best = 1e300;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = Clock::now();
    body();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t mib = 256;
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--mib=", 6) == 0) mib = std::atoll(argv[i] + 6);
  const int64_t vocab = 50257;
  const int64_t tokens = mib * 1024 * 1024 / 2;
  const std::string dir = (std::filesystem::temp_directory_path() / ("moe4d-shard-bench-" + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(dir);
  const std::string stem = dir + "/bench";
  {
    std::mt19937 rng(1);
    std::uniform_int_distribution<int> id(0, static_cast<int>(vocab - 1));
    std::vector<int> ids(static_cast<size_t>(tokens));
    for (int& v : ids) v = id(rng);
    moe4d::write_token_shard(stem, ids, vocab, "bytes", 1);
  }
  struct utimbuf old{.actime = std::time(nullptr) - 60, .modtime = std::time(nullptr) - 60};
  ::utime((stem + ".bin").c_str(), &old);  // old enough to be marked

  std::vector<unsigned char> bytes(static_cast<size_t>(tokens) * 2);
  {
    std::FILE* f = std::fopen((stem + ".bin").c_str(), "rb");
    if (!f || std::fread(bytes.data(), 1, bytes.size(), f) != bytes.size()) return 1;
    std::fclose(f);
  }
  const double gib = static_cast<double>(bytes.size()) / (1024.0 * 1024 * 1024);
  volatile int64_t sink = 0;
  const double sha = best_of_3([&] { sink = sink + static_cast<int64_t>(moe4d::sha256_hex(bytes.data(), bytes.size()).size()); });
  const double scan = best_of_3([&] {
    int64_t bad = 0;
    for (size_t i = 0; i + 1 < bytes.size(); i += 2) bad += (bytes[i] | (bytes[i + 1] << 8)) >= vocab;
    sink = sink + bad;
  });
  const double one_pass = best_of_3([&] {
    sink = sink + moe4d::scan_token_payload(bytes.data(), bytes.size(), moe4d::TokenDType::kUint16, vocab).out_of_vocab;
  });
  const std::string marker = stem + ".bin.verified";
  const double open_first = best_of_3([&] {
    std::filesystem::remove(marker);
    sink = sink + moe4d::TokenDataset::open(stem).num_tokens();
  });
  const double open_marked = best_of_3([&] { sink = sink + moe4d::TokenDataset::open(stem).num_tokens(); });
  const bool marked = std::filesystem::exists(marker);
  std::filesystem::remove_all(dir);

  nlohmann::ordered_json out;
  out["benchmark"] = "shard_verify";
  out["shard_mib"] = mib;
  out["seconds_per_gib"] = {{"sha256", sha / gib}, {"id_scan", scan / gib}, {"one_pass", one_pass / gib},
                            {"open_first", open_first / gib}, {"open_marked", open_marked / gib}};
  out["gib_per_second"] = {{"sha256", gib / sha}, {"one_pass", gib / one_pass}, {"open_first", gib / open_first}};
  out["marker_written"] = marked;
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
