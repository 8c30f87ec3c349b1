// interop/hf_export.cc — export_hf: moe4d checkpoint -> Hugging Face model folder.
#include "interop/hf_export.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <sentencepiece_processor.h>

#include "checkpoint/checkpoint.h"
#include "checkpoint/output_file.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/sharded_index.h"
#include "comm/half_float.h"
#include "config/config_loader.h"
#include "core/error.h"
#include "core/log.h"
#include "data/token_dataset.h"
#include "data/hf_tokenizer.h"
#include "data/tokenizer.h"
#include "interop/hf_tensor_map.h"

namespace moe4d {
namespace fs = std::filesystem;

namespace {

void write_json_file(const std::string& path, const nlohmann::json& value) {
  const std::string text = value.dump(2) + "\n";
  OutputFile out(path);
  out.write(text.data(), text.size());
  out.finish();
}

// The tokenizer spec of the checkpoint: --tokenizer, else data.tokenizer, else the training shard's.
std::string checkpoint_tokenizer(const HfExportOptions& options, const Config& config) {
  if (!options.tokenizer.empty()) return options.tokenizer;
  if (!config.data.tokenizer.empty()) return config.data.tokenizer;
  try {
    return TokenDataset::open(config.data.train).tokenizer_spec();
  } catch (const Error& e) {
    fail("cannot find the tokenizer of checkpoint {} ({}); pass --tokenizer", options.checkpoint, e.what());
  }
}

// tokenizer.model and a LlamaTokenizer config that encodes as moe4d does: sentencepiece pieces, no
// BOS or EOS added (moe4d puts the end-of-document id between documents itself).
void write_sentencepiece_files(const std::string& model_path, const std::string& dir, int seq_length,
                               std::vector<std::string>& files) {
  sentencepiece::SentencePieceProcessor sp;
  if (!sp.Load(model_path).ok()) fail("cannot load tokenizer model {}", model_path);
  std::error_code ec;
  fs::copy_file(model_path, dir + "/tokenizer.model", ec);
  if (ec) fail("cannot copy {} to {}: {}", model_path, dir, ec.message());
  const auto piece = [&](int id) { return id >= 0 ? nlohmann::json(sp.IdToPiece(id)) : nlohmann::json(nullptr); };
  write_json_file(dir + "/tokenizer_config.json",
                  {{"tokenizer_class", "LlamaTokenizer"},
                   {"add_bos_token", false},
                   {"add_eos_token", false},
                   {"bos_token", piece(sp.bos_id())},
                   {"eos_token", piece(sp.eos_id())},
                   {"unk_token", piece(sp.unk_id())},
                   {"pad_token", piece(sp.pad_id())},
                   {"legacy", true},
                   {"clean_up_tokenization_spaces", false},
                   {"model_max_length", seq_length}});
  files.push_back("tokenizer.model");
  files.push_back("tokenizer_config.json");
}

// tokenizer.json as it is, and a PreTrainedTokenizerFast config whose eos_token is moe4d's end of
// document; no BOS is added (the file's post-processor, if any, still applies in HF's encode()).
void write_hf_tokenizer_files(const std::string& path, const std::string& dir, int seq_length,
                              std::vector<std::string>& files) {
  const HfTokenizer tokenizer(path);
  std::error_code ec;
  fs::copy_file(path, dir + "/tokenizer.json", ec);
  if (ec) fail("cannot copy {} to {}: {}", path, dir, ec.message());
  write_json_file(dir + "/tokenizer_config.json", {{"tokenizer_class", "PreTrainedTokenizerFast"},
                                                   {"add_bos_token", false},
                                                   {"add_eos_token", false},
                                                   {"bos_token", nullptr},
                                                   {"eos_token", tokenizer.token(tokenizer.eos_id())},
                                                   {"clean_up_tokenization_spaces", false},
                                                   {"model_max_length", seq_length}});
  files.push_back("tokenizer.json");
  files.push_back("tokenizer_config.json");
}

}  // namespace

HfExportResult export_hf(const HfExportOptions& options) {
  const Checkpoint checkpoint = Checkpoint::open(options.checkpoint);
  const nlohmann::json state = checkpoint.json("state.json");
  if (!state.contains("config") || !state["config"].is_string())
    fail("checkpoint {}: state.json has no config", checkpoint.path());
  const Config config = parse_config(state["config"].get<std::string>(), checkpoint.path() + "/state.json");
  const ModelConfig& m = config.model;

  // The aux-loss-free router biases, by layer.
  std::map<int, std::vector<double>> biases;
  bool bias_nonzero = false;
  for (int l = 0; l < m.num_layers; ++l) {
    if (!m.is_moe_layer(l)) continue;
    const std::string key = std::to_string(l);
    if (!state.contains("router_bias") || !state["router_bias"].contains(key))
      fail("checkpoint {}: state.json has no router bias for MoE layer {}", checkpoint.path(), l);
    biases[l] = state["router_bias"][key].get<std::vector<double>>();
    for (double b : biases[l]) bias_nonzero |= b != 0.0;
  }
  HfExportResult result;
  result.arch = choose_hf_architecture(m, bias_nonzero);

  // Output: a fresh directory, built under a temporary name and renamed when complete.
  const fs::path out_dir = fs::path(options.output_dir).lexically_normal();
  std::error_code ec;
  if (fs::exists(out_dir, ec) && !(fs::is_directory(out_dir, ec) && fs::is_empty(out_dir, ec)))
    fail("export directory {} already exists and is not empty; expected a new or empty directory", out_dir.string());
  const fs::path parent = out_dir.has_parent_path() ? out_dir.parent_path() : fs::path(".");
  fs::create_directories(parent, ec);
  const std::string tmp = (parent / fmt::format(".tmp-{}-{}", out_dir.filename().string(), ::getpid())).string();
  fs::remove_all(tmp, ec);
  if (!fs::create_directory(tmp, ec)) fail("cannot create {}: {}", tmp, ec.message());
  struct TmpGuard {
    std::string path;
    ~TmpGuard() {
      std::error_code e;
      if (!path.empty()) fs::remove_all(path, e);
    }
  } guard{tmp};

  // Tensors: shards of at most max_shard_bytes (a larger tensor gets a shard of its own).
  // Full-tensor or sharded checkpoints alike; one moe4d tensor is held at a time (the rules of one
  // tensor follow each other), so the export holds at most one tensor besides a shard's output.
  const bool bf16 = options.dtype == DType::kBF16;
  if (options.dtype != DType::kF32 && !bf16) fail("HF export writes F32 or BF16 tensors only");
  const CheckpointTensors weights(checkpoint);
  std::string held_name;
  std::vector<float> held;
  const std::vector<HfTensorRule> rules = hf_tensor_rules(m, result.arch);
  const std::map<std::string, Shape> shapes = moe4d_parameter_shapes(m);
  std::vector<std::vector<size_t>> shards(1);
  uint64_t shard_bytes = 0;
  for (size_t i = 0; i < rules.size(); ++i) {
    uint64_t bytes = bf16 ? sizeof(uint16_t) : sizeof(float);
    for (int64_t d : rules[i].hf_shape) bytes *= static_cast<uint64_t>(d);
    if (!shards.back().empty() && shard_bytes + bytes > options.max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(i);
    shard_bytes += bytes;
    result.tensor_bytes += bytes;
  }
  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string file =
        shards.size() == 1 ? "model.safetensors"
                           : fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, shards.size());
    std::vector<Buffer> buffers;
    NamedTensors named;
    for (size_t i : shards[s]) {
      const HfTensorRule& rule = rules[i];
      const int64_t rows = rule.hf_shape.size() == 2 ? rule.hf_shape[0] : 1;
      const int64_t cols = rule.hf_shape.back();
      Buffer buffer(sizeof(float) * rows * cols);
      float* dst = buffer.f32();
      if (rows * cols == 0) {
        // Zero elements: nothing to copy.
      } else if (rule.bias_layer >= 0) {
        const std::vector<double>& bias = biases.at(rule.bias_layer);
        if (int64_t(bias.size()) != cols)
          fail("checkpoint {}: router bias of layer {} has {} entries, expected {}", checkpoint.path(),
               rule.bias_layer, bias.size(), cols);
        for (int64_t c = 0; c < cols; ++c) dst[c] = static_cast<float>(bias[rule.source(0, c)]);
      } else {
        if (!weights.contains(rule.moe4d_name))
          fail("checkpoint {} has no tensor '{}'", checkpoint.path(), rule.moe4d_name);
        const Shape& expected = shapes.at(rule.moe4d_name);
        const std::vector<int64_t> shape = weights.shape(rule.moe4d_name);
        if (shape != expected.dims())
          fail("checkpoint {}: tensor '{}' is F32 {}, expected F32 {} for this config", checkpoint.path(),
               rule.moe4d_name, Shape::of(shape).str(), expected.str());
        if (held_name != rule.moe4d_name) {
          held.assign(size_t(expected.numel()), 0.0f);
          weights.read(rule.moe4d_name, whole_block(std::vector<int64_t>(shape.size(), 0), shape), held.data());
          held_name = rule.moe4d_name;
        }
        const float* from = held.data();
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < cols; ++c) dst[r * cols + c] = from[rule.source(r, c)];
      }
      if (bf16) {  // round to nearest even, in place into the buffer's first half
        auto* half = static_cast<uint16_t*>(buffer.data());
        for (int64_t k = 0; k < rows * cols; ++k) half[k] = float_to_bf16(dst[k]);
        named.emplace_back(rule.hf_name, Tensor(half, DType::kBF16, Shape::of(rule.hf_shape)));
      } else {
        named.emplace_back(rule.hf_name, Tensor::f32(dst, Shape::of(rule.hf_shape)));
      }
      buffers.push_back(std::move(buffer));
      weight_map[rule.hf_name] = file;
    }
    save_safetensors(tmp + "/" + file, named, {{"format", "pt"}});
    result.files.push_back(file);
  }
  if (shards.size() > 1) {
    write_json_file(tmp + "/model.safetensors.index.json",
                    {{"metadata", {{"total_size", result.tensor_bytes}}}, {"weight_map", weight_map}});
    result.files.push_back("model.safetensors.index.json");
  }

  // Tokenizer and configs.
  HfConfigExtras extras;
  const std::string spec = checkpoint_tokenizer(options, config);
  const auto tokenizer = load_tokenizer(spec);
  extras.eos_token_id = tokenizer->eos_id();
  extras.tokenizer_vocab_size = tokenizer->vocab_size();
  if (spec == "bytes")
    log_warn("the byte tokenizer (ids 0-255 = bytes, {} = end of document) has no Hugging Face tokenizer class; "
             "no tokenizer files written",
             tokenizer->eos_id());
  else if (is_hf_tokenizer_file(spec))
    write_hf_tokenizer_files(spec, tmp, m.seq_length, result.files);
  else
    write_sentencepiece_files(spec, tmp, m.seq_length, result.files);
  nlohmann::json hf_config = hf_config_json(m, result.arch, extras);
  if (bf16) hf_config["torch_dtype"] = "bfloat16";
  write_json_file(tmp + "/config.json", hf_config);
  write_json_file(tmp + "/generation_config.json",
                  {{"_from_model_config", true}, {"bos_token_id", nullptr}, {"eos_token_id", extras.eos_token_id}});
  result.files.push_back("config.json");
  result.files.push_back("generation_config.json");

  if (fs::exists(out_dir, ec)) fs::remove(out_dir, ec);  // empty (checked above)
  fs::rename(tmp, out_dir, ec);
  if (ec) fail("cannot rename {} to {}: {}", tmp, out_dir.string(), ec.message());
  guard.path.clear();
  fsync_directory(parent.string());
  return result;
}

}  // namespace moe4d
