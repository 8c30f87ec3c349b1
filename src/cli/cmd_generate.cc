// cli/cmd_generate.cc — `moe4d generate CHECKPOINT --prompt TEXT`: sample text from a checkpoint on one
// process (the checkpoint's full tensors load into a single-rank model whatever layout wrote them).
#include <cblas.h>

#include <cstdio>

#include <fmt/format.h>

#include "checkpoint/checkpoint.h"
#include "cli/commands.h"
#include "config/config_loader.h"
#include "core/error.h"
#include "data/token_dataset.h"
#include "data/tokenizer.h"
#include "model/param_store.h"
#include "model/sampling.h"
#include "model/transformer.h"
#include "train/tensor_gather.h"

namespace moe4d {
namespace {

struct GenerateArgs {
  std::string checkpoint;
  std::string prompt;
  std::string tokenizer;
  int tokens = 64;
  float temperature = 0.8f;
  int top_k = 40;
  uint64_t seed = 0;
};

// The tokenizer the model was trained with: --tokenizer, else the copy the checkpoint carries
// (verified with the rest of it), else data.tokenizer of the checkpoint's config, else the one named
// in the training shard's header (checkpoints written before they carried their tokenizer).
std::string tokenizer_spec(const GenerateArgs& args, const Checkpoint& checkpoint, const nlohmann::json& state,
                           const Config& config) {
  if (!args.tokenizer.empty()) return args.tokenizer;
  if (checkpoint.has_file(kCheckpointTokenizerFile)) return checkpoint.file_path(kCheckpointTokenizerFile);
  if (state.contains("tokenizer") && state["tokenizer"].value("spec", "") == "bytes") return "bytes";
  if (!config.data.tokenizer.empty()) return config.data.tokenizer;
  try {
    return TokenDataset::open(config.data.train).tokenizer_spec();
  } catch (const Error& e) {
    fail("cannot find the tokenizer of this checkpoint ({}); pass --tokenizer", e.what());
  }
}

void run_generate(const GenerateArgs& args) {
  openblas_set_num_threads(1);
  const Checkpoint checkpoint = Checkpoint::open(args.checkpoint);
  const nlohmann::json saved_state = checkpoint.json("state.json");
  const Config config = parse_config(saved_state.at("config").get<std::string>(), checkpoint.path() + "/state.json");
  const ModelConfig& m = config.model;
  auto tokenizer = load_tokenizer(tokenizer_spec(args, checkpoint, saved_state, config));
  check_vocab_fits(tokenizer->vocab_size(), m.vocab_size);

  auto pc = make_single_rank_context();
  ParamStore params;
  Transformer model(m, *pc, {ChunkSpec{0, m.num_layers, true, true}}, params);
  params.finalize();
  const SafetensorsFile& weights = checkpoint.tensors("model.safetensors");
  for (int id = 0; id < params.size(); ++id) {
    const ParamInfo& info = params.info(id);
    if (!weights.contains(info.name)) fail("checkpoint {} has no tensor '{}'", checkpoint.path(), info.name);
    copy_shard_from_full(info, weights.tensor(info.name), params.value(id), checkpoint.path());
  }
  for (MoeBlock* block : model.moe_blocks()) {
    const std::vector<double> bias = saved_state.at("router_bias").at(std::to_string(block->layer()));
    std::copy(bias.begin(), bias.end(), block->router_bias().begin());
  }

  std::vector<int> ids = tokenizer->encode(args.prompt);
  if (ids.empty()) ids.push_back(tokenizer->eos_id());
  const int S = m.seq_length;
  std::vector<int> window(S, 0);
  std::vector<float> logits(m.vocab_size);
  MicroBatchState state;
  Arena scratch;
  CounterRng rng(args.seed);
  std::fputs(args.prompt.c_str(), stdout);
  std::vector<int> generated;
  std::string printed;  // decoded text already written out
  for (int i = 0; i < args.tokens; ++i) {
    // The last S tokens, left-aligned; causal attention makes the padding after them irrelevant.
    const int n = std::min<int>(S, static_cast<int>(ids.size()));
    std::copy(ids.end() - n, ids.end(), window.begin());
    BlockContext ctx{*pc, params, m, model.rope(), state.arena, scratch, 1, S, 1.0f, RecomputeGranularity::kNone,
                     nullptr};
    model.logits_at(window.data(), n - 1, logits.data(), state, ctx);
    // Ids beyond the tokenizer's vocabulary (model vocab rounded up for TP) are never sampled.
    const int next = sample_token(logits.data(), tokenizer->vocab_size(), args.temperature, args.top_k, rng);
    if (next == tokenizer->eos_id()) break;
    ids.push_back(next);
    generated.push_back(next);
    // Decode incrementally: print what the new tokens add to the text so far.
    const std::string text = tokenizer->decode(generated);
    if (text.size() > printed.size() && text.compare(0, printed.size(), printed) == 0) {
      std::fputs(text.c_str() + printed.size(), stdout);
      std::fflush(stdout);
      printed = text;
    }
  }
  std::fputs("\n", stdout);
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "sample text from a checkpoint");
  cmd->add_option("checkpoint", args->checkpoint, "checkpoint step directory, or checkpoint dir (follows latest)")
      ->required();
  cmd->add_option("--prompt", args->prompt, "text to continue");
  cmd->add_option("--tokens", args->tokens, "maximum new tokens (default 64)")->check(CLI::PositiveNumber);
  cmd->add_option("--temperature", args->temperature, "sampling temperature, 0 = greedy (default 0.8)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-k", args->top_k, "sample among the k most likely tokens, 0 = all (default 40)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", args->seed, "sampling seed (default 0)");
  cmd->add_option("--tokenizer", args->tokenizer, "tokenizer spec (default: the one the model was trained with)");
  cmd->callback([args] { run_generate(*args); });
}

}  // namespace moe4d
