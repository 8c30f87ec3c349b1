// Tests of train/metrics.h's MetricsWriter: one whole line per write() however long, a failed
// write (the file size limit standing in for a full disk) is an error naming the file and leaves
// only whole lines, and a resume cuts off a partial last line and the steps after the resume point.
#include "train/metrics.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../common/temp_dir.h"
#include "core/error.h"

namespace moe4d {
namespace {

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

nlohmann::json record(int64_t step, size_t padding) {
  return {{"step", step}, {"loss", 1.0 / double(step + 1)}, {"pad", std::string(padding, 'x')}};
}

TEST(MetricsWriterTest, LongLinesAreWrittenWhole) {
  test::TempDir dir;
  const std::string path = dir.file("metrics.jsonl");
  {
    MetricsWriter writer(path, 0);
    for (int64_t step = 1; step <= 3; ++step) writer.write(record(step, 9000));  // > 4 KiB a line
  }
  const auto lines = lines_of(path);
  ASSERT_EQ(lines.size(), 3u);
  for (size_t i = 0; i < lines.size(); ++i) EXPECT_EQ(nlohmann::json::parse(lines[i])["step"], int64_t(i + 1));
}

TEST(MetricsWriterTest, FileSizeLimitKeepsWholeLines) {
  test::TempDir dir;
  const std::string path = dir.file("metrics.jsonl");
  // RLIMIT_FSIZE with SIGXFSZ ignored: a write crossing the limit is cut short or fails with EFBIG,
  // as a write to a full disk is cut short or fails with ENOSPC.
  struct rlimit old_limit{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  struct sigaction ignore{}, old_action{};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGXFSZ, &ignore, &old_action);
  std::string error;
  int written = 0;
  {
    MetricsWriter writer(path, 0);
    struct rlimit limit = old_limit;
    limit.rlim_cur = 10000;  // ~4.9 lines of 2 KiB: the 5th is cut mid-line
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limit), 0);
    try {
      for (int64_t step = 1; step <= 20; ++step, ++written) writer.write(record(step, 2000));
    } catch (const Error& e) {
      error = e.what();
    }
    setrlimit(RLIMIT_FSIZE, &old_limit);
  }
  sigaction(SIGXFSZ, &old_action, nullptr);
  EXPECT_EQ(written, 4);
  EXPECT_EQ(error, "cannot write metrics file " + path + ": File too large");
  const std::string text = contents(path);
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n') << "a partial line was left at the end";
  const auto lines = lines_of(path);
  ASSERT_EQ(lines.size(), 4u);
  for (const std::string& line : lines) EXPECT_NO_THROW(nlohmann::json::parse(line));
}

TEST(MetricsWriterTest, ResumeCutsPartialLastLineAndLaterSteps) {
  test::TempDir dir;
  const std::string path = dir.file("metrics.jsonl");
  {
    std::ofstream out(path);
    for (int64_t step = 1; step <= 5; ++step) out << record(step, 10).dump() << "\n";
    out << R"({"step": 6, "loss": 0.12)";  // a write cut off by a kill
  }
  {
    MetricsWriter writer(path, 3);
    EXPECT_EQ(writer.dropped_partial_lines(), 1);
    writer.write(record(4, 10));
  }
  const auto lines = lines_of(path);
  ASSERT_EQ(lines.size(), 4u);
  for (size_t i = 0; i < lines.size(); ++i) EXPECT_EQ(nlohmann::json::parse(lines[i])["step"], int64_t(i + 1));
}

TEST(MetricsWriterTest, UnwritableDirectoryIsNamed) {
  test::TempDir dir;
  const std::string file = dir.file("plain-file");
  std::ofstream(file) << "x";
  try {
    MetricsWriter writer(file + "/sub/metrics.jsonl", 0);
    FAIL() << "a metrics file under a regular file was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot create the directory " + file + "/sub of the metrics file"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace moe4d
