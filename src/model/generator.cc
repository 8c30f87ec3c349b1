// model/generator.cc — generate_tokens (model/generator.h).
#include "model/generator.h"

#include <chrono>

#include "core/error.h"
#include "model/sampling.h"

namespace moe4d {

GenerationResult generate_tokens(const Transformer& model, ParallelContext& pc, ParamStore& params,
                                 const ModelConfig& config, const std::vector<int>& prompt,
                                 const GenerationOptions& options) {
  const int S = config.seq_length;
  if (prompt.empty()) fail("generation needs a prompt of at least one token");
  if (static_cast<int>(prompt.size()) >= S)
    fail("the prompt has {} tokens, but the model's context (model.seq_length) is {}: nothing can follow it",
         prompt.size(), S);
  const auto t0 = std::chrono::steady_clock::now();
  GenerationResult result;
  std::vector<int> ids = prompt;
  std::vector<float> logits(config.vocab_size);
  MicroBatchState state;
  Arena scratch;
  CounterRng rng(options.seed);
  const int vocab = options.sample_vocab > 0 ? options.sample_vocab : config.vocab_size;
  KvCache cache(config, config.kv_heads() / pc.tp_size());
  std::vector<int> window(S, 0);

  // Logits of the next token after `ids`.
  const auto step = [&](bool first) {
    if (options.kv_cache) {
      const int n = first ? static_cast<int>(ids.size()) : 1;
      BlockContext ctx{pc, params, config, model.rope(), state.arena, scratch, 1, n, 1.0f,
                       RecomputeGranularity::kNone, nullptr};
      model.decode(ids.data() + ids.size() - n, cache, logits.data(), state, ctx);
    } else {
      // The whole sequence left-aligned in a full window; causal attention ignores the padding after it.
      std::copy(ids.begin(), ids.end(), window.begin());  // host token ids
      BlockContext ctx{pc, params, config, model.rope(), state.arena, scratch, 1, S, 1.0f,
                       RecomputeGranularity::kNone, nullptr};
      model.logits_at(window.data(), static_cast<int>(ids.size()) - 1, logits.data(), state, ctx);
    }
  };
  result.stop = "max_new_tokens";
  for (int i = 0; i < options.max_new_tokens; ++i) {
    if (static_cast<int>(ids.size()) >= S) {
      result.stop = "seq_length";
      break;
    }
    step(i == 0);
    const int next = sample_token(logits.data(), vocab, options.temperature, options.top_k, rng);
    if (next == options.eos_id) {
      result.stop = "eos";
      break;
    }
    ids.push_back(next);
    result.tokens.push_back(next);
    if (options.on_token) options.on_token(result.tokens);
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace moe4d
