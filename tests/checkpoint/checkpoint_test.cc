// Tests of checkpoint/checkpoint.h: write/open round trip, `latest`, retention, checksum refusal
// of any flipped byte, missing files, abandoned writers, and a writer SIGKILLed mid-write.
#include "checkpoint/checkpoint.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/sha256.h"

namespace moe4d {
namespace {
namespace fs = std::filesystem;

class CheckpointTest : public testing::Test {
 protected:
  void SetUp() override {
    root_ = fmt::format("{}/moe4d_checkpoint_test_{}", fs::temp_directory_path().string(), getpid());
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string step_dir(int64_t step) const { return root_ + "/" + checkpoint_dir_name(step); }

  // A checkpoint whose contents depend on `step`: weights, optimizer moments and a state file.
  std::string write_checkpoint(int64_t step, int keep = 100) {
    std::vector<float> w(4 * 8), m(4 * 8);
    for (size_t i = 0; i < w.size(); ++i) {
      w[i] = static_cast<float>(step) + 0.25f * static_cast<float>(i);
      m[i] = -w[i];
    }
    CheckpointWriter writer(root_, step);
    writer.add_safetensors("model.safetensors", {{"w", Tensor::f32(w.data(), Shape{4, 8})}}, {{"step", "x"}});
    writer.add_safetensors("optimizer.safetensors", {{"w.m", Tensor::f32(m.data(), Shape{4, 8})}});
    writer.add_json("state.json", {{"step", step}, {"tokens", step * 1000}});
    return writer.commit(keep);
  }

  std::vector<int64_t> steps() const {
    std::vector<int64_t> out;
    for (const CheckpointEntry& entry : list_checkpoints(root_)) out.push_back(entry.step);
    return out;
  }

  std::vector<std::string> tmp_entries() const {
    std::vector<std::string> out;
    for (const auto& item : fs::directory_iterator(root_))
      if (item.path().filename().string().rfind(".tmp-", 0) == 0) out.push_back(item.path().filename().string());
    return out;
  }

  std::string latest() const {
    std::ifstream in(root_ + "/latest");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  // The message of the moe4d::Error that opening `path` throws ("" if it opens).
  static std::string open_error(const std::string& path) {
    try {
      Checkpoint::open(path);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  static void flip_byte(const std::string& file, size_t offset) {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(offset));
    char c = 0;
    f.get(c);
    f.seekp(static_cast<std::streamoff>(offset));
    f.put(static_cast<char>(c ^ 1));
  }

  std::string root_;
};

TEST_F(CheckpointTest, WriteOpenRoundTrip) {
  const std::string path = write_checkpoint(5);
  EXPECT_EQ(path, step_dir(5));
  EXPECT_TRUE(tmp_entries().empty());

  Checkpoint ckpt = Checkpoint::open(path);
  EXPECT_EQ(ckpt.step(), 5);
  EXPECT_EQ(ckpt.path(), path);
  EXPECT_EQ(ckpt.files(), (std::vector<std::string>{"model.safetensors", "optimizer.safetensors", "state.json"}));
  EXPECT_EQ(ckpt.file_path("state.json"), path + "/state.json");
  EXPECT_EQ(ckpt.json("state.json")["tokens"], 5000);
  const SafetensorsFile& model = ckpt.tensors("model.safetensors");
  EXPECT_EQ(&model, &ckpt.tensors("model.safetensors"));  // mapped once
  EXPECT_EQ(model.metadata().at("step"), "x");
  const Tensor& w = model.tensor("w");
  EXPECT_EQ(w.shape, (Shape{4, 8}));
  for (int i = 0; i < 32; ++i) ASSERT_EQ(w.f32()[i], 5.0f + 0.25f * static_cast<float>(i));
  EXPECT_EQ(ckpt.tensors("optimizer.safetensors").tensor("w.m").f32()[3], -5.75f);

  nlohmann::json manifest = nlohmann::json::parse(std::ifstream(path + "/MANIFEST.json"));
  EXPECT_EQ(manifest["format"], "moe4d-checkpoint");
  EXPECT_EQ(manifest["version"], 1);
  EXPECT_EQ(manifest["step"], 5);
  EXPECT_EQ(manifest["files"]["model.safetensors"]["bytes"], fs::file_size(path + "/model.safetensors"));
  EXPECT_EQ(manifest["files"]["model.safetensors"]["sha256"], sha256_file(path + "/model.safetensors"));

  try {
    ckpt.file_path("absent.json");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "checkpoint " + path + " has no file absent.json in its manifest");
  }
}

TEST_F(CheckpointTest, OpeningTheRootFollowsLatest) {
  write_checkpoint(10);
  EXPECT_EQ(latest(), "step_00000010\n");
  write_checkpoint(20);
  EXPECT_EQ(latest(), "step_00000020\n");
  EXPECT_EQ(Checkpoint::open(root_).step(), 20);
  EXPECT_EQ(Checkpoint::open(root_ + "/").path(), step_dir(20));
  // `latest` is the newest commit, not the highest step (e.g. after resuming from an older one).
  write_checkpoint(15);
  EXPECT_EQ(Checkpoint::open(root_).step(), 15);
  EXPECT_EQ(steps(), (std::vector<int64_t>{10, 15, 20}));
}

TEST_F(CheckpointTest, KeepRetainsTheNewest) {
  write_checkpoint(10, 2);
  write_checkpoint(20, 2);
  EXPECT_EQ(steps(), (std::vector<int64_t>{10, 20}));
  write_checkpoint(30, 2);
  EXPECT_EQ(steps(), (std::vector<int64_t>{20, 30}));
  write_checkpoint(40, 1);
  EXPECT_EQ(steps(), (std::vector<int64_t>{40}));
  EXPECT_FALSE(fs::exists(step_dir(30)));
  EXPECT_TRUE(tmp_entries().empty());
  EXPECT_EQ(Checkpoint::open(root_).step(), 40);
}

TEST_F(CheckpointTest, RewritingAStepReplacesIt) {
  write_checkpoint(10);
  {
    std::vector<float> w(2, 99.0f);
    CheckpointWriter writer(root_, 10);
    writer.add_safetensors("model.safetensors", {{"w", Tensor::f32(w.data(), Shape{2})}});
    writer.commit(2);
  }
  Checkpoint ckpt = Checkpoint::open(root_);
  EXPECT_EQ(ckpt.files(), (std::vector<std::string>{"model.safetensors"}));
  EXPECT_EQ(ckpt.tensors("model.safetensors").tensor("w").f32()[1], 99.0f);
  EXPECT_TRUE(tmp_entries().empty());
}

TEST_F(CheckpointTest, FlippedByteInAnyFileIsRefused) {
  write_checkpoint(10);
  write_checkpoint(20);
  const std::string corrupt = step_dir(20);
  const std::string tail = "; previous checkpoint: " + step_dir(10);
  nlohmann::json manifest = nlohmann::json::parse(std::ifstream(corrupt + "/MANIFEST.json"));
  for (const std::string name : {"model.safetensors", "optimizer.safetensors", "state.json"}) {
    const std::string file = corrupt + "/" + name;
    const std::string expected_sha = manifest["files"][name]["sha256"];
    const size_t size = fs::file_size(file);
    for (size_t offset : {size_t{0}, size / 2, size - 1}) {
      SCOPED_TRACE(name + " byte " + std::to_string(offset));
      flip_byte(file, offset);
      EXPECT_EQ(open_error(root_), fmt::format("checkpoint {} (named by {}/latest) is corrupt: {} sha256 mismatch "
                                               "(expected {}…, got {}…){}",
                                               corrupt, root_, name, expected_sha.substr(0, 12),
                                               sha256_file(file).substr(0, 12), tail));
      EXPECT_EQ(Checkpoint::open(step_dir(10)).step(), 10);
      flip_byte(file, offset);
    }
  }
  // Every single byte of the manifest matters (format, version, step, names, sizes, hashes, syntax).
  const std::string manifest_file = corrupt + "/MANIFEST.json";
  const size_t manifest_size = fs::file_size(manifest_file);
  for (size_t offset = 0; offset < manifest_size; ++offset) {
    flip_byte(manifest_file, offset);
    const std::string error = open_error(corrupt);
    EXPECT_EQ(error.rfind("checkpoint " + corrupt + " is corrupt: ", 0), 0u) << "byte " << offset << ": " << error;
    EXPECT_TRUE(error.ends_with(tail)) << "byte " << offset << ": " << error;
    flip_byte(manifest_file, offset);
  }
  EXPECT_EQ(Checkpoint::open(root_).step(), 20);  // restored
}

TEST_F(CheckpointTest, MissingFileListedInManifest) {
  write_checkpoint(10);
  write_checkpoint(20);
  fs::remove(step_dir(20) + "/optimizer.safetensors");
  EXPECT_EQ(open_error(root_), "checkpoint " + step_dir(20) + " (named by " + root_ +
                               "/latest) is corrupt: optimizer.safetensors is missing; "
                               "previous checkpoint: " + step_dir(10));
  fs::remove(step_dir(10) + "/state.json");
  EXPECT_EQ(open_error(step_dir(10)),
            "checkpoint " + step_dir(10) + " is corrupt: state.json is missing; no previous checkpoint");
}

TEST_F(CheckpointTest, TruncatedFileIsRefusedBySize) {
  write_checkpoint(10);
  const std::string file = step_dir(10) + "/model.safetensors";
  const size_t size = fs::file_size(file);
  fs::resize_file(file, size - 4);
  EXPECT_EQ(open_error(root_), fmt::format("checkpoint {} (named by {}/latest) is corrupt: model.safetensors has {} "
                                           "bytes, expected {}; no previous checkpoint",
                                           step_dir(10), root_, size - 4, size));
}

TEST_F(CheckpointTest, AbandonedWriterLeavesNothing) {
  write_checkpoint(10);
  {
    std::vector<float> w(8, 1.0f);
    CheckpointWriter writer(root_, 20);
    writer.add_safetensors("model.safetensors", {{"w", Tensor::f32(w.data(), Shape{8})}});
    EXPECT_EQ(tmp_entries().size(), 1u);
  }
  EXPECT_TRUE(tmp_entries().empty());
  EXPECT_EQ(steps(), (std::vector<int64_t>{10}));
  EXPECT_EQ(latest(), "step_00000010\n");
}

TEST_F(CheckpointTest, WriterRejectsBadFileNamesAndReuse) {
  CheckpointWriter writer(root_, 1);
  for (const std::string name : {"", "a/b.json", ".hidden", "MANIFEST.json"}) {
    try {
      writer.add_json(name, {});
      ADD_FAILURE() << "expected an error for '" << name << "'";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), "checkpoint file name '" + name +
                                           "' is not allowed, expected a plain name (no '/', no leading '.', not "
                                           "MANIFEST.json)");
    }
  }
  writer.add_json("state.json", {{"a", 1}});
  EXPECT_THROW(writer.add_json("state.json", {}), Error);
  EXPECT_THROW(writer.commit(0), Error);
  writer.commit(1);
  EXPECT_THROW(writer.commit(1), Error);
  EXPECT_THROW(writer.add_json("late.json", {}), Error);
}

TEST_F(CheckpointTest, OpenRejectsWhatIsNotACheckpoint) {
  fs::create_directories(root_ + "/step_00000007");
  fs::create_directories(root_ + "/notes");
  EXPECT_TRUE(list_checkpoints(root_).empty());  // no manifest: incomplete
  EXPECT_EQ(open_error(root_), root_ + " is not a checkpoint, expected a step directory with MANIFEST.json or a "
                                       "checkpoint root with a 'latest' file");
  EXPECT_EQ(open_error(root_ + "/step_00000007"),
            "checkpoint " + root_ + "/step_00000007 is corrupt: MANIFEST.json is missing (the write did not "
            "complete); no previous checkpoint");
  EXPECT_EQ(open_error(root_ + "/nothing"), "no checkpoint at " + root_ + "/nothing: no such directory");
  std::ofstream(root_ + "/latest") << "../elsewhere\n";
  EXPECT_EQ(open_error(root_),
            root_ + "/latest names '../elsewhere', expected a step directory name like step_00000000");
  EXPECT_TRUE(list_checkpoints(root_ + "/nothing").empty());
}

// A writer SIGKILLed while streaming a large file must leave `latest` and the previous checkpoint
// intact and loadable; the next writer removes its temporary directory.
TEST_F(CheckpointTest, WriterKilledMidWrite) {
  write_checkpoint(10);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child only writes (no gtest assertions); it is killed long before it could finish.
    close(pipe_fds[0]);
    try {
      CheckpointWriter writer(root_, 20);
      writer.add_json("state.json", {{"step", 20}});
      const char ready = 1;
      if (write(pipe_fds[1], &ready, 1) != 1) _exit(2);
      // 16 GiB of logical data from a 4 KiB row (row stride 0): streamed for many seconds.
      std::vector<float> row(1024, 0.5f);
      Tensor huge = Tensor::f32(row.data(), Shape{1 << 22, 1024});
      huge.strides = {0, 1, 0, 0};
      writer.add_safetensors("model.safetensors", {{"w", huge}});
    } catch (...) {
      _exit(3);
    }
    _exit(4);
  }
  close(pipe_fds[1]);
  char ready = 0;
  ASSERT_EQ(read(pipe_fds[0], &ready, 1), 1);
  close(pipe_fds[0]);
  const std::string tmp_dir = fmt::format("{}/.tmp-step_00000020-{}", root_, child);
  const std::string partial = tmp_dir + "/model.safetensors";
  std::error_code ec;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  // Wait until the big file is well under way (file_size reports an error until it exists).
  const auto written = [&] {
    const auto bytes = fs::file_size(partial, ec);
    return ec ? 0 : bytes;
  };
  while (written() < (size_t{8} << 20) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the child exited by itself: " << status;

  // Killed mid-write: a partial second file sits in the writer's temporary directory.
  EXPECT_TRUE(fs::exists(tmp_dir + "/state.json"));
  const size_t partial_bytes = fs::file_size(partial);
  EXPECT_GE(partial_bytes, size_t{8} << 20);
  EXPECT_LT(partial_bytes, size_t{16} << 30);
  std::printf("writer killed after %zu bytes of a 16 GiB file\n", partial_bytes);
  EXPECT_FALSE(fs::exists(tmp_dir + "/MANIFEST.json"));
  EXPECT_FALSE(fs::exists(step_dir(20)));
  EXPECT_EQ(latest(), "step_00000010\n");
  EXPECT_EQ(steps(), (std::vector<int64_t>{10}));
  Checkpoint previous = Checkpoint::open(root_);
  EXPECT_EQ(previous.step(), 10);
  EXPECT_EQ(previous.tensors("model.safetensors").tensor("w").f32()[1], 10.25f);

  write_checkpoint(20);
  EXPECT_FALSE(fs::exists(tmp_dir));
  EXPECT_TRUE(tmp_entries().empty());
  EXPECT_EQ(steps(), (std::vector<int64_t>{10, 20}));
  EXPECT_EQ(Checkpoint::open(root_).step(), 20);
}

}  // namespace
}  // namespace moe4d
