// Fuzzes the checkpoint reader (checkpoint/checkpoint.h): MANIFEST.json and state.json of a step
// directory come from the input (split at the first 0 byte), the manifest names files that exist or
// not, and state.json's loss-scaler section goes through the reader resume uses
// (LossScaler::from_json). Contract: moe4d::Error for anything malformed.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "checkpoint/checkpoint.h"
#include "core/error.h"
#include "train/loss_scaler.h"

namespace {

void write(const std::string& path, const std::string& bytes) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (!file) return;
  std::fwrite(bytes.data(), 1, bytes.size(), file);
  std::fclose(file);
}

const std::string& step_dir() {
  static const std::string dir = [] {
    const std::string root = "/tmp/moe4d-fuzz-ckpt-" + std::to_string(::getpid());
    std::filesystem::create_directories(root + "/step_00000001");
    write(root + "/latest", "step_00000001\n");
    return root + "/step_00000001";
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find('\0');
  write(step_dir() + "/MANIFEST.json", input.substr(0, split));
  write(step_dir() + "/state.json", split == std::string::npos ? "{}" : input.substr(split + 1));
  try {
    const moe4d::Checkpoint checkpoint = moe4d::Checkpoint::open(std::filesystem::path(step_dir()).parent_path());
    for (const std::string& name : checkpoint.files()) checkpoint.file_path(name);
  } catch (const moe4d::Error&) {
  }
  // state.json as resume reads it once the manifest verified (which a mutated state.json would not:
  // its sha256 changes), so its reader is fuzzed on its own.
  if (split == std::string::npos) return 0;
  nlohmann::json state;
  try {
    state = nlohmann::json::parse(input.substr(split + 1));
  } catch (const nlohmann::json::exception&) {
    return 0;  // Checkpoint::json reports this as moe4d::Error
  }
  try {
    if (state.is_object() && state.contains("numerics") && state["numerics"].is_object() &&
        state["numerics"].contains("loss_scaler")) {
      moe4d::LossScaler scaler(moe4d::Precision::kFP16, moe4d::LossScaleConfig{});
      scaler.from_json(state["numerics"]["loss_scaler"], "fuzz");
    }
  } catch (const moe4d::Error&) {
  }
  return 0;
}
