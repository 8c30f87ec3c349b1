// bench/prepare/prepare_bench.cc — `moe4d prepare` throughput and peak memory against --workers.
//
// Builds a corpus of `--corpus-mb` MB under a temporary directory (never in the source tree) by
// repeating a mix of the text already on a Debian machine (/usr/share/common-licenses, the
// fortunes, /usr/share/doc/*/copyright), blank-line separated, each copy numbered so no two
// documents repeat exactly. A BPE tokenizer is trained once on the first 8 MB (not timed); then
// `moe4d prepare --tokenizer-model` runs once per worker count in a child process, so the encoding
// pass is what is measured, and the child's peak resident memory comes from wait4(). All runs
// happen in one invocation, so the speedup is a ratio measured under the same machine load; the
// load average before and after is printed because machines are shared.
//
// With --tokenizer bytes no tokenizer is trained and the runs use the byte tokenizer (then reading,
// decompression and writing dominate, which shows the I/O path and the memory bound on big corpora).
//
// Usage: prepare_bench [--corpus-mb 1024] [--workers 1,2] [--vocab-size 4096] [--tokenizer bpe|bytes]
//                      [--moe4d PATH]
// Prints JSON on stdout; progress on stderr.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../../tests/common/temp_dir.h"

namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The text the corpus repeats: plain-text files only (no NUL bytes), in a fixed order.
std::string text_mix() {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const char* dir : {"/usr/share/common-licenses", "/usr/share/games/fortunes"})
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.is_regular_file() && !e.is_symlink() && e.path().extension() != ".dat") files.push_back(e.path());
  for (const auto& e : fs::directory_iterator("/usr/share/doc", ec)) {
    fs::path c = e.path() / "copyright";
    if (fs::is_regular_file(c, ec)) files.push_back(c);
  }
  std::sort(files.begin(), files.end());
  std::string mix;
  for (const fs::path& f : files) {
    std::string t = slurp(f);
    if (t.find('\0') != std::string::npos) continue;
    for (char& c : t)
      if (c == '%' && (&c == t.data() || (&c)[-1] == '\n')) c = ' ';  // fortunes separators -> text
    mix += t + "\n\n";
  }
  return mix;
}

void write_corpus(const fs::path& path, int64_t bytes, const std::string& mix) {
  std::ofstream out(path, std::ios::binary);
  int64_t written = 0;
  for (int64_t copy = 0; written < bytes; ++copy) {
    const std::string header = "copy " + std::to_string(copy) + "\n\n";
    out << header << mix;
    written += int64_t(header.size() + mix.size());
  }
}

double load_average() {
  double l[1] = {0};
  return getloadavg(l, 1) == 1 ? l[0] : -1;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

struct Run {
  double seconds = 0;
  double cpu_seconds = 0;  // user + system of the child: cpu_seconds / seconds is the cores it got
  long max_rss_kib = 0;
  int status = 0;
};

Run run_child(const std::vector<std::string>& args) {
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    if (!freopen("/dev/null", "w", stdout)) _exit(127);
    execv(argv[0], argv.data());
    _exit(127);
  }
  Run r;
  struct rusage usage {};
  wait4(pid, &r.status, 0, &usage);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.max_rss_kib = usage.ru_maxrss;
  r.cpu_seconds = double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                  double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  return r;
}

int64_t header_tokens(const fs::path& dir) {
  int64_t tokens = 0;
  for (const char* f : {"train.json", "valid.json"})
    tokens += nlohmann::json::parse(slurp(dir / f)).at("num_tokens").get<int64_t>();
  return tokens;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t corpus_mb = 1024;
  std::vector<int> workers = {1, 2};
  std::string vocab = "4096", moe4d = MOE4D_BINARY, tokenizer = "bpe";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--corpus-mb") corpus_mb = std::stoll(value);
    else if (flag == "--vocab-size") vocab = value;
    else if (flag == "--moe4d") moe4d = value;
    else if (flag == "--tokenizer") tokenizer = value;
    else if (flag == "--workers") {
      workers.clear();
      std::stringstream s(value);
      for (std::string w; std::getline(s, w, ',');) workers.push_back(std::stoi(w));
    } else {
      std::fprintf(stderr, "unknown flag %s (expected --corpus-mb, --workers, --vocab-size, --moe4d)\n", flag.c_str());
      return 2;
    }
  }
  moe4d::test::TempDir dir;
  const fs::path corpus = fs::path(dir.path()) / "corpus.txt", sample = fs::path(dir.path()) / "sample.txt";
  const std::string mix = text_mix();
  std::fprintf(stderr, "writing a %lld MB corpus to %s\n", (long long)corpus_mb, corpus.c_str());
  write_corpus(corpus, corpus_mb << 20, mix);
  write_corpus(sample, std::min<int64_t>(corpus_mb, 8) << 20, mix);
  const int64_t corpus_bytes = int64_t(fs::file_size(corpus));

  const fs::path tok = fs::path(dir.path()) / "tok";
  Run trained;
  if (tokenizer == "bpe") {
    std::fprintf(stderr, "training a BPE tokenizer on %s\n", sample.c_str());
    trained = run_child({moe4d, "prepare", "--input", sample.string(), "--output", tok.string(), "--vocab-size", vocab});
    if (trained.status != 0) {
      std::fprintf(stderr, "training the tokenizer failed\n");
      return 1;
    }
  }
  const std::vector<std::string> tokenizer_flags =
      tokenizer == "bpe" ? std::vector<std::string>{"--tokenizer-model", (tok / "tokenizer.model").string()}
                         : std::vector<std::string>{"--tokenizer", "bytes"};
  nlohmann::json result = {{"bench", "prepare"},
                           {"cpu", cpu_model()},
                           {"online_cpus", sysconf(_SC_NPROCESSORS_ONLN)},
                           {"corpus_bytes", corpus_bytes},
                           {"tokenizer", tokenizer == "bpe" ? "sentencepiece bpe " + vocab + " (reused via --tokenizer-model)"
                                                           : "bytes"},
                           {"bpe_training", {{"sample_bytes", tokenizer == "bpe" ? int64_t(fs::file_size(sample)) : 0},
                                             {"seconds", trained.seconds},
                                             {"peak_rss_mib", trained.max_rss_kib / 1024.0}}},
                           {"load_average_before", load_average()}};
  nlohmann::json runs = nlohmann::json::array();
  double one_worker_seconds = 0;
  for (int w : workers) {
    const fs::path out = fs::path(dir.path()) / ("out" + std::to_string(w));
    std::fprintf(stderr, "prepare --workers %d ...\n", w);
    std::vector<std::string> args = {moe4d, "prepare", "--input", corpus.string(), "--output", out.string(),
                                     "--workers", std::to_string(w)};
    args.insert(args.end(), tokenizer_flags.begin(), tokenizer_flags.end());
    Run r = run_child(args);
    if (r.status != 0) {
      std::fprintf(stderr, "prepare --workers %d failed (status %d)\n", w, r.status);
      return 1;
    }
    const int64_t tokens = header_tokens(out);
    if (w == 1) one_worker_seconds = r.seconds;
    runs.push_back({{"workers", w},
                    {"seconds", r.seconds},
                    {"mb_per_s", corpus_bytes / r.seconds / 1e6},
                    {"tokens", tokens},
                    {"tokens_per_s", tokens / r.seconds},
                    {"peak_rss_mib", r.max_rss_kib / 1024.0},
                    {"cpu_seconds", r.cpu_seconds},
                    {"cores_used", r.cpu_seconds / r.seconds},
                    {"speedup_vs_1_worker", one_worker_seconds > 0 ? one_worker_seconds / r.seconds : 0.0}});
    fs::remove_all(out);
  }
  result["runs"] = runs;
  result["load_average_after"] = load_average();
  std::printf("%s\n", result.dump(2).c_str());
  return 0;
}
