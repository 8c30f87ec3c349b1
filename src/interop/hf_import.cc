// interop/hf_import.cc — import_hf: Hugging Face model folder -> moe4d checkpoint at step 0.
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "checkpoint/checkpoint.h"
#include "checkpoint/output_file.h"
#include "checkpoint/safetensors.h"
#include "config/config_loader.h"
#include "core/error.h"
#include "core/log.h"
#include "data/tokenizer.h"
#include "interop/hf_export.h"
#include "interop/hf_tensor_map.h"
#include "kernels/precision.h"

namespace moe4d {
namespace fs = std::filesystem;

namespace {

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read {}: no such file", path);
  std::stringstream text;
  text << in.rdbuf();
  try {
    return nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::parse_error& e) {
    fail("{}: not valid JSON ({})", path, e.what());
  }
}

// The tensors of an HF folder: model.safetensors, or the shards its index names.
class HfTensorSet {
 public:
  explicit HfTensorSet(const std::string& dir) {
    const std::string index = dir + "/model.safetensors.index.json";
    if (fs::exists(index)) {
      const nlohmann::json j = read_json(index);
      if (!j.contains("weight_map") || !j["weight_map"].is_object())
        fail("{}: no \"weight_map\" object", index);
      for (const auto& [name, file] : j["weight_map"].items()) {
        if (!file.is_string() || file.get<std::string>().find('/') != std::string::npos)
          fail("{}: weight_map entry '{}' is {}, expected a file name in {}", index, name, file.dump(), dir);
        const std::string f = file.get<std::string>();
        if (!files_.count(f)) files_.emplace(f, std::make_unique<SafetensorsFile>(SafetensorsFile::open(dir + "/" + f)));
        if (!files_.at(f)->contains(name)) fail("{}: names {} for tensor '{}', which that file lacks", index, f, name);
        where_[name] = files_.at(f).get();
      }
    } else {
      const std::string single = dir + "/model.safetensors";
      if (!fs::exists(single)) fail("{} has neither model.safetensors nor model.safetensors.index.json", dir);
      files_.emplace("model.safetensors", std::make_unique<SafetensorsFile>(SafetensorsFile::open(single)));
      for (const auto& entry : files_.begin()->second->tensors()) where_[entry.first] = files_.begin()->second.get();
    }
  }
  const Tensor* find(const std::string& name) const {
    auto it = where_.find(name);
    return it == where_.end() ? nullptr : &it->second->tensor(name);
  }
  const SafetensorsFile& file_of(const std::string& name) const { return *where_.at(name); }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& entry : where_) out.push_back(entry.first);
    return out;
  }

 private:
  std::map<std::string, std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> where_;
};

// Element i of a float tensor (F32, BF16, F16, F64), as fp32. Exact for F32/BF16/F16.
float element(const Tensor& t, int64_t i) {
  switch (t.dtype) {
    case DType::kF32: return static_cast<const float*>(t.data)[i];
    case DType::kBF16: return float_from_bf16_bits(static_cast<const uint16_t*>(t.data)[i]);
    case DType::kF16: return float_from_fp16_bits(static_cast<const uint16_t*>(t.data)[i]);
    case DType::kF64: return static_cast<float>(static_cast<const double*>(t.data)[i]);
    default: MOE4D_CHECK_MSG(false, "not a float dtype");
  }
  return 0.0f;
}

}  // namespace

HfImportResult import_hf(const HfImportOptions& options) {
  const std::string dir = options.input_dir;
  const std::string config_path = dir + "/config.json";
  const HfImportedModel imported = hf_model_from_config_json(read_json(config_path), config_path);
  HfImportResult result;
  result.arch = imported.arch;
  const ModelConfig& m = imported.model;

  // The output root must not hold a checkpoint already (nothing existing is replaced).
  std::error_code ec;
  if (!list_checkpoints(options.output).empty() || fs::exists(options.output + "/latest", ec) ||
      fs::exists(options.output + "/config.yaml", ec))
    fail("import output {} already holds a checkpoint or config.yaml; expected a new directory", options.output);

  const HfTensorSet hf(dir);
  const std::map<std::string, Shape> shapes = moe4d_parameter_shapes(m);
  std::map<std::string, Buffer> values;
  std::map<std::string, int64_t> written;
  for (const auto& [name, shape] : shapes) values.emplace(name, Buffer(sizeof(float) * shape.numel()));
  std::map<int, std::vector<double>> biases;
  for (int l = 0; l < m.num_layers; ++l)
    if (m.is_moe_layer(l)) biases[l].assign(m.moe.num_experts, 0.0);

  std::set<std::string> used;
  for (const HfTensorRule& rule : hf_tensor_rules(m, imported.arch)) {
    const Tensor* t = hf.find(rule.hf_name);
    if (!t) fail("{}: no tensor '{}' ({} expects it)", dir, rule.hf_name, hf_architecture_name(imported.arch));
    const SafetensorsFile& file = hf.file_of(rule.hf_name);
    if (t->shape.dims() != rule.hf_shape)
      fail("{}: tensor '{}' is {}, expected {} from config.json", file.path(), rule.hf_name, t->shape.str(),
           Shape::of(rule.hf_shape).str());
    if (t->dtype != DType::kF32 && t->dtype != DType::kBF16 && t->dtype != DType::kF16 && t->dtype != DType::kF64)
      fail("{}: tensor '{}' is {}, expected a float dtype (F32, BF16, F16, F64)", file.path(), rule.hf_name,
           dtype_name(t->dtype));
    used.insert(rule.hf_name);
    const int64_t rows = rule.hf_shape.size() == 2 ? rule.hf_shape[0] : 1;
    const int64_t cols = rule.hf_shape.back();
    if (rows * cols == 0) continue;  // an absent module's empty tensor
    if (rule.bias_layer >= 0) {
      for (int64_t c = 0; c < cols; ++c) biases[rule.bias_layer][rule.source(0, c)] = element(*t, c);
      continue;
    }
    float* dst = values.at(rule.moe4d_name).f32();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) dst[rule.source(r, c)] = element(*t, r * cols + c);
    written[rule.moe4d_name] += rows * cols;
  }
  for (const auto& [name, shape] : shapes)
    MOE4D_CHECK_MSG(written[name] == shape.numel(), "tensor rules cover {} of {} elements of {}", written[name],
                    shape.numel(), name);
  int ignored = 0;
  for (const std::string& name : hf.names()) ignored += used.count(name) ? 0 : 1;
  if (ignored > 0)
    log_warn("{}: {} tensor(s) not part of the {} forward pass were ignored (e.g. multi-token-prediction layers)",
             dir, ignored, hf_architecture_name(imported.arch));

  // The config: the model from config.json, a single-rank layout and small training defaults that
  // the user edits; train.init_from points at the imported weights, and the run's own checkpoints
  // and metrics go to <output>/train (a directory of their own: the imported step 0 is not a run).
  Config config;
  config.model = m;
  config.train.global_batch_size = 8;
  config.train.steps = 100;
  config.data.train = options.train_data;
  std::string tokenizer = options.tokenizer;
  fs::create_directories(options.output, ec);
  if (ec) fail("cannot create {}: {}", options.output, ec.message());
  // The folder's tokenizer comes along: tokenizer.model (sentencepiece), else tokenizer.json (byte-level BPE).
  for (const char* name : {"tokenizer.model", "tokenizer.json"}) {
    if (!tokenizer.empty() || !fs::exists(dir + "/" + name)) continue;
    const std::string source = dir + "/" + name;
    try {
      load_tokenizer(source);
    } catch (const Error& e) {
      fail("{} (pass --tokenizer to use another tokenizer)", e.what());
    }
    tokenizer = options.output + "/" + name;
    fs::copy_file(source, tokenizer, ec);
    if (ec) fail("cannot copy {} to {}: {}", source, options.output, ec.message());
  }
  config.data.tokenizer = tokenizer;
  // ... and is the checkpoint's: a copy in it, recorded in state.json, as training checkpoints carry theirs.
  nlohmann::json tokenizer_state = {{"spec", tokenizer}};
  if (!tokenizer.empty() && tokenizer != "bytes") check_vocab_fits(load_tokenizer(tokenizer)->vocab_size(), m.vocab_size);
  const std::string root = fs::path(options.output).lexically_normal().string();
  config.train.init_from = root;
  config.checkpoint.dir = root + "/train";
  config.source = root + "/config.yaml";

  CheckpointWriter writer(root, 0);
  if (!tokenizer.empty() && tokenizer != "bytes") {
    const std::string absolute = fs::absolute(tokenizer).lexically_normal().string();
    tokenizer_state = {{"spec", absolute},
                       {"file", kCheckpointTokenizerFile},
                       {"sha256", writer.add_file_copy(kCheckpointTokenizerFile, absolute)}};
  }
  NamedTensors named;
  for (auto& [name, buffer] : values) named.emplace_back(name, Tensor::f32(buffer.f32(), shapes.at(name)));
  writer.add_safetensors("model.safetensors", named,
                         {{"format", "moe4d"}, {"imported_from", fs::absolute(dir).lexically_normal().string()}});
  nlohmann::json bias_json = nlohmann::json::object();
  for (const auto& [layer, bias] : biases) bias_json[std::to_string(layer)] = bias;
  writer.add_json("state.json", {{"step", 0},
                                 {"config", config_to_yaml(config)},
                                 {"router_bias", bias_json},
                                 {"tokenizer", tokenizer_state},
                                 {"imported_from", {{"format", "hf"},
                                                    {"architecture", hf_architecture_name(imported.arch)},
                                                    {"eos_token_id", imported.eos_token_id}}}});
  result.checkpoint_path = writer.commit(1);
  result.config_path = root + "/config.yaml";
  const std::string yaml = config_to_yaml(config);
  OutputFile out(result.config_path);
  out.write(yaml.data(), yaml.size());
  out.finish();
  result.config = config;
  return result;
}

}  // namespace moe4d
