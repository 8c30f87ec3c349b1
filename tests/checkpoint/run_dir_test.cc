// Tests of checkpoint/run_dir.h and checkpoint/checkpoint_inspect.h: what a used run directory
// holds and the refusal naming it, moving a run aside intact, where --resume starts when `latest`
// is missing or corrupt, writability probes, and verification naming the file with a flipped byte.
#include "checkpoint/run_dir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "../common/temp_dir.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_inspect.h"
#include "core/error.h"

namespace moe4d {
namespace {
namespace fs = std::filesystem;

class RunDirTest : public testing::Test {
 protected:
  std::string root() const { return tmp_.file("run"); }
  std::string step_dir(int64_t step) const { return root() + "/" + checkpoint_dir_name(step); }
  void write_checkpoint(int64_t step) {
    std::vector<float> w(16, float(step));
    CheckpointWriter writer(root(), step);
    writer.add_safetensors("model.safetensors", {{"layers.1.moe.experts.w1", Tensor::f32(w.data(), Shape{2, 8})}});
    writer.add_json("state.json", {{"step", step}});
    writer.commit(10);
  }
  void flip_byte(const std::string& file, size_t offset) {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(offset));
    char c = 0;
    f.read(&c, 1);
    c ^= 0x20;
    f.seekp(static_cast<std::streamoff>(offset));
    f.write(&c, 1);
  }
  std::string error_of(const std::function<void()>& fn) {
    try {
      fn();
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  }

  test::TempDir tmp_{"moe4d-run-dir"};
};

TEST_F(RunDirTest, UsedDirectoryIsDescribedAndRefusalNamesBothWaysOn) {
  const std::string metrics = root() + "/metrics.jsonl";
  EXPECT_FALSE(inspect_run_dir(root(), metrics).used());
  write_checkpoint(10);
  write_checkpoint(20);
  std::ofstream(metrics) << "{\"step\": 1}\n";
  const RunDirContents contents = inspect_run_dir(root(), metrics);
  EXPECT_TRUE(contents.used());
  EXPECT_EQ(used_run_dir_message(root(), contents, metrics),
            "checkpoint.dir " + root() + " already holds a run (2 checkpoints (step_00000010 .. step_00000020), "
            "latest, metrics.jsonl); pass --resume to continue it, or --start-over to move it aside (renamed to " +
                root() + ".old-<time>, nothing is deleted) and start fresh");
}

TEST_F(RunDirTest, MoveAsideKeepsEverything) {
  write_checkpoint(5);
  const std::string moved = move_run_aside(root(), root() + "/metrics.jsonl");
  EXPECT_FALSE(fs::exists(root()));
  EXPECT_EQ(moved.rfind(root() + ".old-", 0), 0u) << moved;
  EXPECT_EQ(Checkpoint::open(moved).step(), 5);
}

TEST_F(RunDirTest, ResumeUsesLatestThenFallsBackToNewestVerifying) {
  EXPECT_TRUE(find_resume_point(root()).path.empty());  // nothing yet: step 0
  write_checkpoint(10);
  write_checkpoint(20);
  write_checkpoint(30);
  ResumePoint point = find_resume_point(root());
  EXPECT_EQ(point.step, 30);
  EXPECT_TRUE(point.notice.empty());

  fs::remove(root() + "/latest");
  point = find_resume_point(root());
  EXPECT_EQ(point.step, 30);
  EXPECT_EQ(point.notice, "--resume: not using " + root() + "/latest: " + root() + "/latest is missing; resuming from " +
                              step_dir(30) + ", the newest checkpoint that verifies");

  std::ofstream(root() + "/latest") << "step_00000030\n";
  flip_byte(step_dir(30) + "/model.safetensors", 100);
  point = find_resume_point(root());
  EXPECT_EQ(point.step, 20);
  EXPECT_NE(point.notice.find("not using " + root() + "/latest: checkpoint " + step_dir(30) + " (named by " + root() +
                              "/latest) is corrupt: model.safetensors sha256 mismatch"),
            std::string::npos)
      << point.notice;

  flip_byte(step_dir(20) + "/state.json", 2);
  flip_byte(step_dir(10) + "/state.json", 2);
  const std::string error = error_of([&] { find_resume_point(root()); });
  EXPECT_EQ(error.rfind("--resume: no checkpoint in " + root() + " verifies (", 0), 0u) << error;
  EXPECT_NE(error.find("refusing to start from step 0 over them: pass --start-over"), std::string::npos) << error;
}

// Fault injection found that a damaged `latest` made --resume skip the intact directory it names
// (step 10 instead of 20) and print raw NUL and newline bytes. Each case: steps 10 and 20 intact,
// only `latest` damaged; step 20 must be chosen, and the notice must be one printable line.
TEST_F(RunDirTest, DamagedLatestNeverCostsTheNewestCheckpoint) {
  write_checkpoint(10);
  write_checkpoint(20);
  const std::string latest = root() + "/latest";
  struct Case {
    const char* what;
    std::string bytes;  // written into latest; "<remove>" removes it
    std::string reason;  // expected in the notice
  };
  const std::vector<Case> cases = {
      {"appended bytes", std::string("step_00000020\nstep_0000001\0\0x", 29),
       latest + " holds 'step_00000020\\nstep_0000001\\x00\\x00x', expected a step directory name like step_00000000"},
      {"truncated", "step_000000", latest + " holds 'step_000000', expected a step directory name"},
      {"NUL bytes", std::string(8, '\0'), latest + " holds '\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00'"},
      {"empty", "", latest + " holds '', expected"},
      {"missing", "<remove>", latest + " is missing"},
      {"a missing step", "step_00000030\n", latest + " names step_00000030, which does not exist"},
      {"an older step", "step_00000010\n", latest + " names step_00000010, older than step_00000020"},
      {"long garbage", std::string(500, 'z'), "...(500 bytes)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    fs::remove(latest);
    if (c.bytes != "<remove>") std::ofstream(latest, std::ios::binary) << c.bytes;
    const ResumePoint point = find_resume_point(root());
    EXPECT_EQ(point.step, 20);
    EXPECT_EQ(point.path, step_dir(20));
    EXPECT_EQ(point.notice.rfind("--resume: not using " + latest + ": ", 0), 0u) << point.notice;
    EXPECT_NE(point.notice.find(c.reason), std::string::npos) << point.notice;
    EXPECT_NE(point.notice.find("; resuming from " + step_dir(20) + ", the newest checkpoint that verifies"),
              std::string::npos)
        << point.notice;
    for (char ch : point.notice) EXPECT_TRUE(ch >= 0x20 && ch < 0x7f) << "unprintable byte in: " << point.notice;
  }
  // A step directory without a manifest (a write that never completed) named by `latest`.
  fs::create_directories(step_dir(30));
  std::ofstream(latest) << "step_00000030\n";
  ResumePoint point = find_resume_point(root());
  EXPECT_EQ(point.step, 20);
  EXPECT_NE(point.notice.find("names step_00000030, which has no MANIFEST.json"), std::string::npos) << point.notice;

  // `latest` intact but the newest directory corrupt: the one before, with the refusal named.
  std::ofstream(latest) << "step_00000020\n";
  flip_byte(step_dir(20) + "/state.json", 2);
  point = find_resume_point(root());
  EXPECT_EQ(point.step, 10);
  EXPECT_NE(point.notice.find("(named by " + latest + ") is corrupt: state.json sha256 mismatch"), std::string::npos)
      << point.notice;
}

// `latest` names an older step than a newer intact one (no notice is wrong here: work would be lost).
TEST_F(RunDirTest, NewestVerifyingStepWinsOverACorruptNewerOne) {
  write_checkpoint(10);
  write_checkpoint(20);
  write_checkpoint(30);
  flip_byte(step_dir(30) + "/model.safetensors", 100);
  std::ofstream(root() + "/latest") << "step_00000020\n";
  const ResumePoint point = find_resume_point(root());
  EXPECT_EQ(point.step, 20);
  EXPECT_EQ(point.notice.rfind("--resume: resuming from " + step_dir(20) + " (named by " + root() +
                                   "/latest), the newest checkpoint that verifies (refused: checkpoint " + step_dir(30) +
                                   " is corrupt: model.safetensors sha256 mismatch",
                               0),
            0u)
      << point.notice;
}

TEST_F(RunDirTest, EscapedTextIsPrintable) {
  EXPECT_EQ(escaped_text(std::string("a\0b\n\\\xff", 6)), "a\\x00b\\n\\\\\\xff");
  EXPECT_EQ(escaped_text("abcdef", 3), "abc...(6 bytes)");
}

TEST_F(RunDirTest, WritabilityProbeNamesTheReason) {
  const std::string file = tmp_.file("a-file");
  std::ofstream(file) << "x";
  EXPECT_EQ(error_of([&] { require_writable_dir(file + "/sub", "checkpoint.dir"); }),
            "cannot create checkpoint.dir " + file + "/sub: Not a directory");
  EXPECT_EQ(error_of([&] { require_writable_dir(file, "checkpoint.dir"); }),
            "checkpoint.dir " + file + " is not a directory");
  EXPECT_EQ(error_of([&] { require_writable_dir(root(), "checkpoint.dir"); }), "(no error)");
}

TEST_F(RunDirTest, VerifyNamesTheFlippedFile) {
  write_checkpoint(7);
  std::vector<std::string> lines;
  verify_checkpoints(root(), [&](const std::string& line) { lines.push_back(line); });
  EXPECT_EQ(lines.size(), 3u);  // latest + 2 files
  flip_byte(step_dir(7) + "/model.safetensors", 60);
  lines.clear();
  const std::string error =
      error_of([&] { verify_checkpoints(step_dir(7), [&](const std::string& line) { lines.push_back(line); }); });
  EXPECT_EQ(error.rfind("checkpoint verification failed: " + step_dir(7) + "/model.safetensors: sha256 mismatch", 0), 0u)
      << error;
  const auto listed = list_run_checkpoints(root());
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_TRUE(listed[0].latest);
  EXPECT_EQ(listed[0].step, 7);
}

}  // namespace
}  // namespace moe4d
