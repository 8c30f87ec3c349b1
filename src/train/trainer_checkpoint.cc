// train/trainer_checkpoint.cc — Trainer::save_checkpoint / load_checkpoint, and the full-tensor state
// they move (gather_state / load_state).
//
// Two formats (checkpoint.format, docs/checkpoints.md), holding the same tensors under the same
// global names: parameters <name>, AdamW's exp_avg.<name> and exp_avg_sq.<name>, plus state.json
// (step, the config, layout, the routers' balancing biases, the loss scale and skipped-step count,
// the tokenizer) written once by rank 0. The data position needs no state: batches are a pure
// function of (seed, step). So a run resumed from step s continues bit-exactly, and any parallel
// layout loads a checkpoint of any other.
//   full     rank 0 gathers whole tensors (model.safetensors, optimizer.safetensors) and writes
//            them. Under ZeRO the optimizer shards are assembled into each rank's flat layout first
//            (a transient buffer of the rank's parameter count), with zero_stage 3 the values are
//            materialised for the gather.
//   sharded  every rank streams the pieces it owns (train/checkpoint_shards.h) into its own file of
//            a temporary directory rank 0 created; rank 0 collects the records into index.json and
//            commits the directory once every rank's file is on disk (checkpoint/checkpoint.h).
//            checkpoint.async: the ranks write from a staged copy on a thread of their own and the
//            commit waits for a step boundary at which all have finished (train/async_checkpoint.h).
// Every save's figures (time, time the step loop was blocked) go into the next step's metrics
// record and a log line (record_checkpoint).
// Loading reads, for every parameter, this rank's block (values, and with zero_stage 0) or its ZeRO
// slices (optimizer state, zero_stage >= 1) straight from the pieces that overlap it
// (checkpoint/sharded_index.h), whichever format wrote it. The ranks verify the files' checksums
// between them (each hashes every world-size-th file) and fail together on the first mismatch.
#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>

#include <fmt/format.h>

#include <algorithm>

#include "checkpoint/checkpoint.h"
#include "checkpoint/sharded_index.h"
#include "config/config_loader.h"
#include "core/error.h"
#include "core/log.h"
#include "train/checkpoint_shards.h"
#include "train/trainer.h"

namespace moe4d {
namespace {
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

// Opens `path` and verifies it between the ranks of `world`: sizes everywhere, the sha256 of every
// world-size-th file on each rank. The first failing rank's message fails every rank.
// Sets the world's deadline to checkpoint.timeout for the life of a save (the other ranks wait for
// the writers under it, not collective_timeout: a deadline tight enough to catch a straggling step
// would kill healthy jobs during a save), and restores the step deadline afterwards.
class SaveDeadline {
 public:
  SaveDeadline(Communicator& world, double seconds) : world_(world), step_(world.timeout_seconds()) {
    world_.set_timeout_seconds(seconds);
  }
  ~SaveDeadline() { world_.set_timeout_seconds(step_); }

 private:
  Communicator& world_;
  double step_;
};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

Checkpoint open_verified(Communicator& world, const std::string& path) {
  std::optional<Checkpoint> checkpoint;
  std::string error;
  size_t file = 0;
  try {
    checkpoint.emplace(Checkpoint::open(path, [&](const std::string&) {
      return int(file++ % size_t(world.size())) == world.rank();
    }));
  } catch (const Error& e) {
    error = e.what();
  }
  int first = error.empty() ? world.size() : world.rank();
  world.all_reduce(&first, 1, DType::kI32, ReduceOp::kMin);
  if (first < world.size()) fail("{}", broadcast_text(world, error, first));
  return std::move(*checkpoint);
}

std::vector<int64_t> block_start(const ParamInfo& info) {
  std::vector<int64_t> start;
  for (int d = 0; d < info.global_shape.ndim(); ++d) start.push_back(info.global_start(d));
  return start;
}

// A tensor's global shape must be the parameter's.
void check_shape(const std::string& name, const std::vector<int64_t>& shape, const ParamInfo& info,
                 const std::string& origin) {
  if (shape != info.global_shape.dims())
    fail("{}: tensor '{}' has shape {}, but this model needs {} (was the checkpoint written for another model "
         "config?)",
         origin, name, Shape::of(shape).str(), info.global_shape.str());
}

// Reads elements [r.begin, r.end) of block r of tensor `name` (the parameter `info`'s values or
// moments) into dst, checking that the tensor has the parameter's global shape.
using BlockReader =
    std::function<void(const std::string& name, const ParamInfo& info, const BlockRange& r, float* dst)>;

// Through `read`: this rank's block of every parameter's values into the flat buffers (zero_stage 3
// re-shards them); AdamW's moments as the block into the optimizer's flat buffers (zero_stage 0) or
// as only this rank's ZeRO slices into its shards (>= 1; the padding zeroed). The same path for
// checkpoints of either format and for full tensors handed over in memory (load_state).
void load_blocks(ParamStore& params, ParameterSync& sync, const BlockReader& read) {
  const bool sharded = sync.state_sharded();
  for (int id = 0; id < params.size(); ++id) {
    const ParamInfo& info = params.info(id);
    const BlockRange whole = whole_block(block_start(info), info.local_shape.dims());
    read(info.name, info, whole, params.value(id));
    if (sharded) continue;
    read("exp_avg." + info.name, info, whole, sync.moment(info.group, false) + info.offset);
    read("exp_avg_sq." + info.name, info, whole, sync.moment(info.group, true) + info.offset);
  }
  if (!sharded) return;
  sync.zero_moments();
  for (const ShardPiece& s : sync.layout().pieces()) {
    const ParamInfo& info = params.info(s.param);
    const int64_t begin = int64_t(s.flat_begin - info.offset);
    const BlockRange range{block_start(info), info.local_shape.dims(), begin, begin + int64_t(s.count)};
    read("exp_avg." + info.name, info, range, sync.moment(info.group, false) + s.shard_offset);
    read("exp_avg_sq." + info.name, info, range, sync.moment(info.group, true) + s.shard_offset);
  }
  sync.reshard_values();
}

// Reads from a verified checkpoint of either format.
BlockReader checkpoint_reader(const CheckpointTensors& tensors, const std::string& origin) {
  return [&tensors, origin](const std::string& name, const ParamInfo& info, const BlockRange& r, float* dst) {
    check_shape(name, tensors.shape(name), info, origin);
    tensors.read(name, r, dst);
  };
}
}  // namespace

Trainer::FullState Trainer::gather_state() {
  FullState out;
  out.values = gather_parameters();
  // One optimizer state (m or v) as full tensors: from the optimizer's flat buffers (zero_stage 0) or
  // from its shards assembled into this rank's flat layout (>= 1).
  for (const bool second : {false, true}) {
    Buffer scratch[kNumParamGroups];  // the flat-layout copies of a sharded state; empty when not sharded
    const float* base[kNumParamGroups];
    for (int g = 0; g < kNumParamGroups; ++g) base[g] = sync_->flat_moment(ParamGroup(g), second, scratch[g]);
    auto full = gather_full_tensors(pc_, params_, [&](int id) {
      const ParamInfo& info = params_.info(id);
      return base[int(info.group)] + info.offset;
    });
    for (auto& [name, t] : full) out.optimizer.emplace((second ? "exp_avg_sq." : "exp_avg.") + name, std::move(t));
  }
  return out;
}

void Trainer::save_checkpoint() {
  finish_checkpoint();  // at most one save in flight
  const auto started = Clock::now();
  const bool sharded = config_.checkpoint.format == CheckpointFormat::kSharded;
  FullState full;
  if (!sharded) full = gather_state();
  // Router biases of every MoE layer, contributed by one rank of each pipeline stage.
  const int E = config_.model.moe.num_experts;
  std::vector<double> bias(moe_layers_.size() * size_t(E), 0.0);
  if (pc_.coord.tp == 0 && pc_.coord.dp == 0 && pc_.coord.ep == 0)
    for (MoeBlock* block : model_->moe_blocks()) {
      const size_t slot = std::find(moe_layers_.begin(), moe_layers_.end(), block->layer()) - moe_layers_.begin();
      for (int e = 0; e < E; ++e) bias[slot * E + e] = block->router_bias()[e];
    }
  if (!bias.empty()) pc_.world->all_reduce(bias.data(), bias.size(), DType::kF64, ReduceOp::kSum);

  // state.json and the tokenizer, written once by rank 0 in either format.
  const auto add_metadata = [&](CheckpointWriter& writer) {
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
                                   {"format", sharded ? "sharded" : "full"},
                                   {"optimizer", sync_->optimizer_name()},
                                   {"layout",
                                    {{"data_parallel", pc_.dp_size()},
                                     {"expert_parallel", pc_.ep_size()},
                                     {"tensor_parallel", pc_.tp_size()},
                                     {"pipeline_parallel", pc_.pp_size()},
                                     {"zero_stage", config_.parallel.zero_stage}}}});
  };

  const SaveDeadline deadline(*pc_.world, config_.checkpoint.timeout);
  if (sharded) {
    // Rank 0 makes the temporary directory and writes the metadata into it; every rank streams its
    // pieces into its own file there (checkpoint.async: from a staged copy, on a thread of its own);
    // commit_sharded_save collects the records and commits.
    ShardedSave& save = sharded_save_;
    save = ShardedSave{};
    save.pending = true;
    save.step = step_;
    save.async = config_.checkpoint.async;
    save.started = started;
    std::string tmp;
    if (pc_.rank == 0) {
      try {
        save.writer = std::make_unique<CheckpointWriter>(config_.checkpoint.dir, step_);
        add_metadata(*save.writer);
        tmp = save.writer->tmp_dir();
      } catch (const Error& e) {
        save.error = e.what();
        save.writer.reset();
      }
    }
    tmp = broadcast_text(*pc_.world, tmp, 0);
    if (!tmp.empty()) {
      std::vector<RankPiece> pieces =
          rank_checkpoint_pieces(params_, sync_->layout(), pc_.coord, sync_->piece_sources());
      if (save.async) shard_writer_.start(tmp, pc_.rank, std::move(pieces));
      else save.record = write_rank_shard(tmp, pc_.rank, std::move(pieces));
    }
    save.blocked_s = seconds_since(started);
    if (!save.async) commit_sharded_save();
    return;
  }
  // Full: rank 0 writes; the outcome is shared so that every rank fails together if the write fails.
  std::string error, path;
  if (pc_.rank == 0) {
    try {
      CheckpointWriter writer(config_.checkpoint.dir, step_);
      writer.add_safetensors("model.safetensors", as_named(full.values), {{"format", "moe4d"}});
      writer.add_safetensors("optimizer.safetensors", as_named(full.optimizer),
                             {{"optimizer", sync_->optimizer_name()}});
      add_metadata(writer);
      path = writer.commit(config_.checkpoint.keep);
    } catch (const Error& e) {
      error = e.what();
    }
  }
  error = broadcast_text(*pc_.world, error, 0);
  if (!error.empty()) fail("{}", error);
  last_checkpoint_ = config_.checkpoint.dir + "/" + checkpoint_dir_name(step_);
  record_checkpoint(step_, false, seconds_since(started), seconds_since(started), 0);
}

void Trainer::commit_sharded_save() {
  const auto started = Clock::now();
  const SaveDeadline deadline(*pc_.world, config_.checkpoint.timeout);
  // Taken out first: whatever happens below, no save stays pending, and a failed one's temporary
  // directory is removed (after this rank's write has ended).
  ShardedSave save = std::move(sharded_save_);
  sharded_save_ = ShardedSave{};
  const RankShardRecord mine = shard_writer_.in_flight() ? shard_writer_.wait() : std::move(save.record);
  const std::vector<RankShardRecord> records = gather_shard_records(*pc_.world, mine);
  std::string error = save.error;
  if (pc_.rank == 0 && save.writer) {
    try {
      ShardedIndex index;
      for (const RankShardRecord& record : records) {
        if (!record.error.empty()) fail("checkpoint write failed on {}", record.error);
        if (record.file.empty()) continue;
        save.writer->add_written_file(record.file, record.bytes, record.sha256);
        add_to_index(index, record);
      }
      save.writer->add_json(kShardedIndexFile, sharded_index_to_json(index));
      save.writer->commit(config_.checkpoint.keep);
    } catch (const Error& e) {
      error = e.what();
    }
  }
  error = broadcast_text(*pc_.world, error, 0);
  if (!error.empty()) fail("{}", error);
  // The largest staging buffer of any rank (0 for synchronous saves).
  double staging = double(shard_writer_.staging_bytes());
  pc_.world->all_reduce(&staging, 1, DType::kF64, ReduceOp::kMax);
  last_checkpoint_ = config_.checkpoint.dir + "/" + checkpoint_dir_name(save.step);
  record_checkpoint(save.step, save.async, save.blocked_s + seconds_since(started), seconds_since(save.started),
                    uint64_t(staging));
}

void Trainer::finish_checkpoint() {
  if (sharded_save_.pending) commit_sharded_save();
}

void Trainer::poll_checkpoint(bool wait) {
  if (!sharded_save_.pending) return;
  if (wait) return commit_sharded_save();
  int done = !shard_writer_.in_flight() || shard_writer_.finished() ? 1 : 0;
  pc_.world->all_reduce(&done, 1, DType::kI32, ReduceOp::kMin);
  if (done) commit_sharded_save();
}

void Trainer::record_checkpoint(int64_t step, bool async, double blocked_s, double total_s, uint64_t staging_bytes) {
  const nlohmann::json figures = {{"step", step},
                                  {"path", last_checkpoint_},
                                  {"format", config_.checkpoint.format == CheckpointFormat::kSharded ? "sharded" : "full"},
                                  {"async", async},
                                  {"blocked_s", blocked_s},
                                  {"total_s", total_s},
                                  {"staging_bytes", staging_bytes}};
  checkpoint_record_.push_back(figures);
  if (pc_.rank == 0 && !options_.quiet)
    log_info("checkpoint written: {} (step {}, {:.3f} s, training blocked {:.3f} s{})", last_checkpoint_, step,
             total_s, blocked_s, async ? ", asynchronous" : "");
}

void Trainer::load_checkpoint(const std::string& path) {
  const Checkpoint checkpoint = open_verified(*pc_.world, path);
  const CheckpointTensors tensors(checkpoint);
  const std::string origin = checkpoint.path();
  load_blocks(params_, *sync_, checkpoint_reader(tensors, origin));
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
  load_blocks(params_, *sync_,
              [&](const std::string& name, const ParamInfo& info, const BlockRange& r, float* dst) {
                const bool moment = name.rfind("exp_avg", 0) == 0;
                const Tensor& full = moment ? optimizer(name) : values(name);
                if (full.dtype != DType::kF32 || !full.is_contiguous())
                  fail("{}: tensor '{}' is {}{}, expected contiguous F32", origin, name, dtype_name(full.dtype),
                       full.is_contiguous() ? "" : " (strided)");
                check_shape(name, full.shape.dims(), info, origin);
                read_from_full(full.f32(), full.shape.dims(), r, dst);
              });
}

void Trainer::load_weights(const std::string& path) {
  const Checkpoint checkpoint = open_verified(*pc_.world, path);
  const CheckpointTensors tensors(checkpoint);
  const std::string origin = "train.init_from " + checkpoint.path();
  const BlockReader read = checkpoint_reader(tensors, origin);
  for (int id = 0; id < params_.size(); ++id) {
    const ParamInfo& info = params_.info(id);
    read(info.name, info, whole_block(block_start(info), info.local_shape.dims()), params_.value(id));
  }
  sync_->reshard_values();
  restore_router_biases(*model_, checkpoint.json("state.json"), origin);
  if (pc_.rank == 0 && !options_.quiet) log_info("initialised from {} (weights only, step 0)", origin);
}

}  // namespace moe4d
