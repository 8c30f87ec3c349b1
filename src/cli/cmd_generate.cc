// cli/cmd_generate.cc — `moe4d generate CHECKPOINT --prompt TEXT`: sample text from a checkpoint on one
// process (the checkpoint's full tensors load into a single-rank model whatever layout wrote them), with
// a KV cache and absolute positions up to the trained seq_length (model/generator.h).
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
#include "core/log.h"
#include "model/generator.h"
#include "model/transformer.h"
#include "checkpoint/sharded_index.h"

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
  bool kv_cache = true;
  bool dropless = false;
  bool json = false;
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
  Config config = parse_config(saved_state.at("config").get<std::string>(), checkpoint.path() + "/state.json");
  if (args.dropless) config.model.moe.capacity_factor.reset();
  const ModelConfig& m = config.model;
  auto tokenizer = load_tokenizer(tokenizer_spec(args, checkpoint, saved_state, config));
  check_vocab_fits(tokenizer->vocab_size(), m.vocab_size);

  auto pc = make_single_rank_context();
  ParamStore params;
  Transformer model(config.model, *pc, {ChunkSpec{0, m.num_layers, true, true}}, params);
  params.finalize();
  // Full-tensor or sharded: each parameter read straight from the file(s) holding it.
  const CheckpointTensors weights(checkpoint);
  for (int id = 0; id < params.size(); ++id) {
    const ParamInfo& info = params.info(id);
    if (weights.shape(info.name) != info.global_shape.dims())
      fail("checkpoint {}: tensor '{}' has shape {}, this model needs {}", checkpoint.path(), info.name,
           Shape::of(weights.shape(info.name)).str(), info.global_shape.str());
    weights.read(info.name, whole_block(std::vector<int64_t>(info.global_shape.ndim(), 0), info.global_shape.dims()),
                 params.value(id));
  }
  for (MoeBlock* block : model.moe_blocks()) {
    const std::vector<double> bias = saved_state.at("router_bias").at(std::to_string(block->layer()));
    std::copy(bias.begin(), bias.end(), block->router_bias().begin());
  }

  std::vector<int> ids = tokenizer->encode(args.prompt);
  if (ids.empty()) ids.push_back(tokenizer->eos_id());
  if (m.moe.capacity_factor && args.kv_cache) {
    log_warn("the model drops tokens over capacity (capacity_factor {}); with the KV cache each step routes only "
             "its new tokens, so capacity differs from a full-window forward; --dropless generates without dropping",
             *m.moe.capacity_factor);
  }
  if (static_cast<int>(ids.size()) + args.tokens > m.seq_length && !args.json)
    log_warn("the prompt ({} tokens) plus --tokens {} exceed the model's context of {} positions (model.seq_length, "
             "the trained length); generation stops there",
             ids.size(), args.tokens, m.seq_length);

  GenerationOptions options{.max_new_tokens = args.tokens, .temperature = args.temperature, .top_k = args.top_k,
                            .seed = args.seed, .kv_cache = args.kv_cache,
                            // Ids beyond the tokenizer's vocabulary (model vocab rounded up for TP) are never sampled.
                            .sample_vocab = tokenizer->vocab_size(), .eos_id = tokenizer->eos_id()};
  std::string printed;  // decoded text already written out
  if (!args.json) {
    std::fputs(args.prompt.c_str(), stdout);
    // Decode incrementally: print what the new tokens add to the text so far.
    options.on_token = [&](const std::vector<int>& generated) {
      const std::string text = tokenizer->decode(generated);
      if (text.size() > printed.size() && text.compare(0, printed.size(), printed) == 0) {
        std::fputs(text.c_str() + printed.size(), stdout);
        std::fflush(stdout);
        printed = text;
      }
    };
  }
  const GenerationResult result = generate_tokens(model, *pc, params, config.model, ids, options);
  if (args.json) {
    const nlohmann::json out = {{"prompt_ids", ids},
                                {"ids", result.tokens},
                                {"text", tokenizer->decode(result.tokens)},
                                {"stop", result.stop},
                                {"kv_cache", args.kv_cache},
                                {"new_tokens", result.tokens.size()},
                                {"seconds", result.seconds},
                                {"tokens_per_s", result.seconds > 0 ? result.tokens.size() / result.seconds : 0.0}};
    // Byte-level tokenizers (bytes, tokenizer.json) can stop inside a UTF-8 character: such bytes become U+FFFD.
    std::fputs((out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n").c_str(), stdout);
  } else {
    std::fputs("\n", stdout);
  }
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
  cmd->add_flag("!--no-kv-cache", args->kv_cache, "recompute the whole sequence for every token instead of caching "
                                                   "keys and values (slower; same tokens)");
  cmd->add_flag("--dropless", args->dropless, "generate without capacity dropping (capacity_factor null)");
  cmd->add_flag("--json", args->json, "print one JSON object (prompt and new token ids, text, tokens/s) instead of "
                                      "the text");
  cmd->callback([args] { run_generate(*args); });
}

}  // namespace moe4d
