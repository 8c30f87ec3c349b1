// checkpoint/checkpoint_consolidate.cc — full-tensor files streamed from the pieces.
#include "checkpoint/checkpoint_consolidate.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "checkpoint/output_file.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/sharded_index.h"
#include "core/error.h"

namespace moe4d {
namespace fs = std::filesystem;

namespace {

bool is_moment(const std::string& name) { return name.rfind("exp_avg.", 0) == 0 || name.rfind("exp_avg_sq.", 0) == 0; }

// A safetensors file of the F32 tensors `names` (in that order), their data read from `tensors`
// in runs of at most buffer.size() elements.
void write_streamed(OutputFile& out, const CheckpointTensors& tensors, const std::vector<std::string>& names,
                    const nlohmann::json& metadata, std::vector<float>& buffer) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const std::string& name : names) {
    const std::vector<int64_t> shape = tensors.shape(name);
    const uint64_t bytes = uint64_t(Shape::of(shape).numel()) * sizeof(float);
    header[name] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  header["__metadata__"] = metadata;
  write_safetensors_header(out, header.dump());
  for (const std::string& name : names) {
    const std::vector<int64_t> shape = tensors.shape(name);
    const int64_t numel = Shape::of(shape).numel();
    for (int64_t begin = 0; begin < numel; begin += int64_t(buffer.size())) {
      const int64_t end = std::min(numel, begin + int64_t(buffer.size()));
      tensors.read(name, BlockRange{std::vector<int64_t>(shape.size(), 0), shape, begin, end}, buffer.data());
      out.write(buffer.data(), size_t(end - begin) * sizeof(float));
    }
  }
}

}  // namespace

ConsolidateResult consolidate_checkpoint(const std::string& source, const std::string& output_root,
                                         size_t buffer_bytes) {
  const Checkpoint checkpoint = Checkpoint::open(source);
  const fs::path source_root = fs::weakly_canonical(fs::path(checkpoint.path()).parent_path());
  std::error_code ec;
  if (fs::exists(output_root, ec) && fs::weakly_canonical(output_root) == source_root)
    fail("ckpt consolidate: --output {} is the root of the source checkpoint {}; expected another directory",
         output_root, checkpoint.path());
  const CheckpointTensors tensors(checkpoint);
  std::vector<std::string> params, moments;
  for (const std::string& name : tensors.names()) (is_moment(name) ? moments : params).push_back(name);
  nlohmann::json state = checkpoint.has_file("state.json") ? checkpoint.json("state.json") : nlohmann::json::object();
  const std::string optimizer = state.value("optimizer", std::string("adamw"));
  if (state.is_object()) state["format"] = "full";

  std::vector<float> buffer(std::max<size_t>(1, buffer_bytes / sizeof(float)));
  CheckpointWriter writer(output_root, checkpoint.step());
  ConsolidateResult result;
  const auto add = [&](const std::string& file, const std::vector<std::string>& names, const nlohmann::json& meta) {
    writer.add_stream(file, [&](OutputFile& out) {
      write_streamed(out, tensors, names, meta, buffer);
      result.bytes += out.bytes_written();
    });
    result.tensors += names.size();
  };
  add("model.safetensors", params, {{"format", "moe4d"}});
  if (!moments.empty()) add("optimizer.safetensors", moments, {{"optimizer", optimizer}});
  if (checkpoint.has_file("state.json")) writer.add_json("state.json", state);
  // Everything else the checkpoint carries (its tokenizer) travels unchanged.
  for (const std::string& file : checkpoint.files()) {
    const bool piece_file = file.rfind("rank_", 0) == 0 && file.ends_with(".safetensors");
    if (piece_file || file == kShardedIndexFile || file == "state.json" || file == "model.safetensors" ||
        file == "optimizer.safetensors")
      continue;
    writer.add_file_copy(file, checkpoint.file_path(file));
  }
  result.path = writer.commit(1 << 30);
  return result;
}

}  // namespace moe4d
