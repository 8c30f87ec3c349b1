// bench/generate/generate_bench.cc — greedy generation speed without and with the KV cache on the
// demo model's shape. Prints one JSON document.
//
// usage: generate_bench [--config=configs/demo.yaml] [--tokens=256] [--prompt=16] [--seed=1234]
//   The model has the config's shape, freshly initialised from train.seed (no training needed: the
//   cost of a forward pass does not depend on the weights). Its seq_length is raised to
//   prompt + tokens when shorter (the demo's 128 cannot hold 256 new tokens at absolute positions).
//   uncached: every new token recomputes the whole sequence in a full seq_length window (what
//   `generate --no-kv-cache` does, and what generate did before the cache); cached: the prompt runs
//   once, then each token alone over the cached keys and values. One process, one BLAS thread.
//   Also reports whether both produced the same tokens.
#include <cblas.h>

#include <cstdio>
#include <cstring>
#include <string>

#include <nlohmann/json.hpp>

#include "config/config_loader.h"
#include "model/generator.h"
#include "model/param_store.h"
#include "parallel/parallel_context.h"

namespace {

std::string flag(int argc, char** argv, const std::string& name, const std::string& fallback) {
  const std::string prefix = "--" + name + "=";
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) return argv[i] + prefix.size();
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace moe4d;
  openblas_set_num_threads(1);
  const std::string config_path = flag(argc, argv, "config", "configs/demo.yaml");
  const int tokens = std::stoi(flag(argc, argv, "tokens", "256"));
  const int prompt_len = std::stoi(flag(argc, argv, "prompt", "16"));
  Config config = load_config(config_path);
  const int trained_seq = config.model.seq_length;
  config.model.seq_length = std::max(config.model.seq_length, prompt_len + tokens);
  const ModelConfig& m = config.model;

  auto pc = make_single_rank_context();
  ParamStore params;
  Transformer model(m, *pc, {ChunkSpec{0, m.num_layers, true, true}}, params);
  params.finalize();
  params.init_values(std::stoull(flag(argc, argv, "seed", std::to_string(config.train.seed))));
  std::vector<int> prompt(prompt_len);
  for (int i = 0; i < prompt_len; ++i) prompt[i] = (i * 37 + 11) % m.vocab_size;

  nlohmann::json runs = nlohmann::json::object();
  std::vector<int> out[2];
  for (int cached = 0; cached < 2; ++cached) {
    GenerationOptions options{.max_new_tokens = tokens, .temperature = 0.0f, .kv_cache = cached == 1};
    const GenerationResult r = generate_tokens(model, *pc, params, m, prompt, options);
    out[cached] = r.tokens;
    runs[cached ? "kv_cache" : "uncached"] = {{"new_tokens", r.tokens.size()},
                                              {"seconds", r.seconds},
                                              {"tokens_per_s", r.tokens.size() / r.seconds}};
  }
  const double speedup = runs["kv_cache"]["tokens_per_s"].get<double>() / runs["uncached"]["tokens_per_s"].get<double>();
  const nlohmann::json report = {
      {"benchmark", "generate_kv_cache"},
      {"config", config_path},
      {"model", {{"hidden_size", m.hidden_size}, {"num_layers", m.num_layers}, {"num_heads", m.num_heads},
                 {"kv_heads", m.kv_heads()}, {"num_experts", m.moe.num_experts}, {"vocab_size", m.vocab_size},
                 {"seq_length", m.seq_length}, {"config_seq_length", trained_seq}, {"weights", "fresh init"}}},
      {"prompt_tokens", prompt_len},
      {"runs", runs},
      {"speedup", speedup},
      {"same_tokens", out[0] == out[1]}};
  std::printf("%s\n", report.dump(2).c_str());
  return out[0] == out[1] ? 0 : 1;
}
