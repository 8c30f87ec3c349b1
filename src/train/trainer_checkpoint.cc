// train/trainer_checkpoint.cc — Trainer::save_checkpoint / load_checkpoint, and the full-tensor state
// they move (gather_state / load_state).
//
// A checkpoint holds full (unsharded) tensors under their global names: model.safetensors
// (parameters), optimizer.safetensors (AdamW's exp_avg.<name> and exp_avg_sq.<name>) and state.json
// (step, the config, the routers' balancing biases, the loss scale and skipped-step count). The data
// position needs no state: batches are a pure function of (seed, step). So a run resumed from step s
// continues bit-exactly, and any parallel layout can load any checkpoint.
//
// Under ZeRO (docs/zero.md) the optimizer state of a rank is a shard of each group's flat buffer:
// saving assembles the shards over the data-parallel group into the rank's full flat layout first
// (a transient buffer of the rank's parameter count), loading cuts this rank's slices out of it; with
// zero_stage 3 the values are materialised for the save and re-sharded after a load. So a checkpoint
// written with any zero_stage loads with any other, in any layout.
#include <filesystem>

#include <fmt/format.h>

#include <algorithm>

#include "checkpoint/checkpoint.h"
#include "config/config_loader.h"
#include "core/error.h"
#include "core/log.h"
#include "train/trainer.h"

namespace moe4d {
namespace {
// Flat-layout copies of a sharded optimizer state (one per group); empty buffers when not sharded.
struct FlatState {
  Buffer group[kNumParamGroups];
};

// The aux-loss-free balancing biases of this rank's MoE layers from state.json.
void restore_router_biases(Transformer& model, const nlohmann::json& state, const std::string& origin) {
  for (MoeBlock* block : model.moe_blocks()) {
    const std::string key = std::to_string(block->layer());
    if (!state.contains("router_bias") || !state["router_bias"].contains(key))
      fail("checkpoint {}: state.json has no router bias for MoE layer {}", origin, key);
    const nlohmann::json& saved = state["router_bias"][key];
    if (!saved.is_array() || !std::all_of(saved.begin(), saved.end(), [](const auto& v) { return v.is_number(); }))
      fail("checkpoint {}: state.json router bias of layer {} is {}, expected a list of numbers", origin, key,
           saved.dump());
    const std::vector<double> bias = saved.get<std::vector<double>>();
    if (bias.size() != block->router_bias().size())
      fail("checkpoint {}: router bias of layer {} has {} experts, this model has {}", origin, key, bias.size(),
           block->router_bias().size());
    std::copy(bias.begin(), bias.end(), block->router_bias().begin());
  }
}

// The config as recorded in a checkpoint: data paths absolute, so that the record stays true
// wherever the checkpoint is read from.
Config with_absolute_data_paths(Config config) {
  for (std::string* path : {&config.data.train, &config.data.valid, &config.data.tokenizer})
    if (!path->empty() && *path != "bytes") *path = std::filesystem::absolute(*path).lexically_normal().string();
  for (DataSourceConfig& source : config.data.train_sources)
    source.path = std::filesystem::absolute(source.path).lexically_normal().string();
  return config;
}

NamedTensors as_named(std::map<std::string, FullTensor>& tensors) {
  NamedTensors out;
  for (auto& [name, t] : tensors) out.emplace_back(name, Tensor::f32(t.data.f32(), t.shape));
  return out;
}
}  // namespace

Trainer::FullState Trainer::gather_state() {
  FullState out;
  out.values = gather_parameters();
  // One optimizer state (m or v) as full tensors: from the optimizer's flat buffers (zero_stage 0) or
  // from its shards assembled into this rank's flat layout (>= 1).
  for (const bool second : {false, true}) {
    FlatState flat;
    const float* base[kNumParamGroups];
    for (int g = 0; g < kNumParamGroups; ++g) {
      const ParamGroup group = ParamGroup(g);
      const float* state = second ? optimizer_->exp_avg_sq(group) : optimizer_->exp_avg(group);
      base[g] = state;
      if (!zero_values_) continue;
      flat.group[g] = Buffer(params_.flat_size(group) * sizeof(float));
      zero_values_->assemble(group, state, flat.group[g].f32());
      base[g] = flat.group[g].f32();
    }
    auto full = gather_full_tensors(pc_, params_, [&](int id) {
      const ParamInfo& info = params_.info(id);
      return base[int(info.group)] + info.offset;
    });
    for (auto& [name, t] : full) out.optimizer.emplace((second ? "exp_avg_sq." : "exp_avg.") + name, std::move(t));
  }
  return out;
}

void Trainer::save_checkpoint() {
  FullState state = gather_state();
  // Router biases of every MoE layer, contributed by one rank of each pipeline stage.
  const int E = config_.model.moe.num_experts;
  std::vector<double> bias(moe_layers_.size() * size_t(E), 0.0);
  if (pc_.coord.tp == 0 && pc_.coord.dp == 0 && pc_.coord.ep == 0)
    for (MoeBlock* block : model_->moe_blocks()) {
      const size_t slot = std::find(moe_layers_.begin(), moe_layers_.end(), block->layer()) - moe_layers_.begin();
      for (int e = 0; e < E; ++e) bias[slot * E + e] = block->router_bias()[e];
    }
  if (!bias.empty()) pc_.world->all_reduce(bias.data(), bias.size(), DType::kF64, ReduceOp::kSum);

  // Rank 0 writes; the outcome is shared so that every rank fails together if the write fails.
  std::string error;
  if (pc_.rank == 0) {
    try {
      CheckpointWriter writer(config_.checkpoint.dir, step_);
      writer.add_safetensors("model.safetensors", as_named(state.values), {{"format", "moe4d"}});
      writer.add_safetensors("optimizer.safetensors", as_named(state.optimizer), {{"optimizer", optimizer_->name()}});
      // The tokenizer travels with the checkpoint (generate needs nothing else): a sentencepiece
      // model is copied in, its checksum in the manifest and in state.json.
      std::string tokenizer = config_.data.tokenizer;
      if (tokenizer.empty() && train_data_) tokenizer = train_data_->source(0).tokens->tokenizer_spec();
      nlohmann::json tokenizer_state = {{"spec", tokenizer}};
      if (!tokenizer.empty() && tokenizer != "bytes") {
        tokenizer = std::filesystem::absolute(tokenizer).lexically_normal().string();
        tokenizer_state = {{"spec", tokenizer},
                           {"file", kCheckpointTokenizerFile},
                           {"sha256", writer.add_file_copy(kCheckpointTokenizerFile, tokenizer)}};
      }
      nlohmann::json biases = nlohmann::json::object();
      for (size_t i = 0; i < moe_layers_.size(); ++i)
        biases[std::to_string(moe_layers_[i])] = std::vector<double>(bias.begin() + i * E, bias.begin() + (i + 1) * E);
      writer.add_json("state.json", {{"step", step_},
                                     {"config", config_to_yaml(with_absolute_data_paths(config_))},
                                     {"router_bias", biases},
                                     {"numerics", numerics_state()},
                                     {"tokenizer", tokenizer_state},
                                     {"layout",
                                      {{"data_parallel", pc_.dp_size()},
                                       {"expert_parallel", pc_.ep_size()},
                                       {"tensor_parallel", pc_.tp_size()},
                                       {"pipeline_parallel", pc_.pp_size()},
                                       {"zero_stage", config_.parallel.zero_stage}}}});
      const std::string path = writer.commit(config_.checkpoint.keep);
      if (!options_.quiet) log_info("checkpoint written: {}", path);
    } catch (const Error& e) {
      error = e.what();
    }
  }
  // The other ranks wait here for rank 0's write: under checkpoint.timeout, not collective_timeout
  // (a deadline tight enough to catch a straggling step would kill healthy jobs during a save).
  int failed = error.empty() ? 0 : 1;
  const double step_timeout = pc_.world->timeout_seconds();
  pc_.world->set_timeout_seconds(config_.checkpoint.timeout);
  pc_.world->all_reduce(&failed, 1, DType::kI32, ReduceOp::kMax);
  pc_.world->set_timeout_seconds(step_timeout);
  if (failed) fail("{}", error.empty() ? "checkpoint write failed on rank 0" : error);
  last_checkpoint_ = config_.checkpoint.dir + "/" + checkpoint_dir_name(step_);
}

void Trainer::load_checkpoint(const std::string& path) {
  const Checkpoint checkpoint = Checkpoint::open(path);
  const SafetensorsFile& model = checkpoint.tensors("model.safetensors");
  const SafetensorsFile& optimizer = checkpoint.tensors("optimizer.safetensors");
  const std::string origin = checkpoint.path();
  auto tensor = [&](const SafetensorsFile& file, const std::string& name) -> const Tensor& {
    if (!file.contains(name))
      fail("checkpoint {}: {} has no tensor '{}' (was it written for another model config?)", origin,
           file.path(), name);
    return file.tensor(name);
  };
  load_state([&](const std::string& name) -> const Tensor& { return tensor(model, name); },
             [&](const std::string& name) -> const Tensor& { return tensor(optimizer, name); }, origin);
  const nlohmann::json state = checkpoint.json("state.json");
  restore_router_biases(*model_, state, origin);
  // Loss scale and skipped-step count (absent from checkpoints older than mixed precision: fresh).
  if (state.contains("numerics")) restore_numerics_state(state["numerics"], origin);
  step_ = checkpoint.step();
  if (step_ >= config_.train.steps && pc_.rank == 0)
    log_warn("checkpoint {} is at step {}, train.steps is {}: nothing left to train", origin, step_,
             config_.train.steps);
  else if (pc_.rank == 0 && !options_.quiet)
    log_info("resumed from {} (step {})", origin, step_);
}

void Trainer::load_state(const TensorLookup& values, const TensorLookup& optimizer, const std::string& origin) {
  // Values into the flat buffers (zero_stage 3: re-sharded below); optimizer state into the
  // optimizer's flat buffers, or into this rank's flat layout and then cut into its shards.
  FlatState flat[2];
  auto state_of = [&](int which, ParamGroup g) {
    float* own = which == 0 ? optimizer_->exp_avg(g) : optimizer_->exp_avg_sq(g);
    if (!zero_values_) return own;
    Buffer& b = flat[which].group[int(g)];
    if (b.bytes() == 0) b = Buffer(params_.flat_size(g) * sizeof(float));
    return b.f32();
  };
  for (int id = 0; id < params_.size(); ++id) {
    const ParamInfo& info = params_.info(id);
    copy_shard_from_full(info, values(info.name), params_.value(id), origin);
    copy_shard_from_full(info, optimizer("exp_avg." + info.name), state_of(0, info.group) + info.offset, origin);
    copy_shard_from_full(info, optimizer("exp_avg_sq." + info.name), state_of(1, info.group) + info.offset, origin);
  }
  if (zero_values_) {
    for (ParamGroup g : {ParamGroup::kDense, ParamGroup::kExpert}) {
      zero_values_->cut(g, state_of(0, g), optimizer_->exp_avg(g));
      zero_values_->cut(g, state_of(1, g), optimizer_->exp_avg_sq(g));
    }
    zero_values_->shard_from_flat();
  }
}

void Trainer::load_weights(const std::string& path) {
  const Checkpoint checkpoint = Checkpoint::open(path);
  const SafetensorsFile& model = checkpoint.tensors("model.safetensors");
  const std::string origin = checkpoint.path();
  for (int id = 0; id < params_.size(); ++id) {
    const ParamInfo& info = params_.info(id);
    if (!model.contains(info.name))
      fail("train.init_from {}: {} has no tensor '{}' (was it written for another model config?)", origin,
           model.path(), info.name);
    copy_shard_from_full(info, model.tensor(info.name), params_.value(id), origin);
  }
  if (zero_values_) zero_values_->shard_from_flat();
  restore_router_biases(*model_, checkpoint.json("state.json"), origin);
  if (pc_.rank == 0 && !options_.quiet) log_info("initialised from {} (weights only, step 0)", origin);
}

}  // namespace moe4d
