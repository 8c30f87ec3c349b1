// cli/cmd_prepare.cc — `moe4d prepare`: tokenizer + train/valid token shards from a text corpus.
// Maps the flags onto data::PrepareOptions (data/prepare.h); progress goes to stderr through the
// log, the final summary to stdout.
#include <memory>

#include "cli/commands.h"
#include "core/log.h"
#include "data/prepare.h"

namespace moe4d {

void add_prepare_command(CLI::App& app) {
  auto options = std::make_shared<PrepareOptions>();
  auto inputs = std::make_shared<std::vector<std::string>>();
  auto vocab_size = std::make_shared<int>(kDefaultBpeVocabSize);

  CLI::App* cmd = app.add_subcommand(
      "prepare", "train a tokenizer (sentencepiece BPE, or bytes) and write train/valid token shards");
  cmd->add_option("--input", *inputs,
                  fmt::format("corpus file or directory; repeatable (default: {}, the Debian `fortunes` texts)",
                              kDefaultCorpusDir));
  cmd->add_option("--output", options->output_dir,
                  "output directory (tokenizer.model, train.bin/.json, valid.bin/.json)")
      ->required();
  cmd->add_option("--tokenizer", options->tokenizer, "bpe: train a byte-fallback BPE tokenizer; bytes: byte ids")
      ->check(CLI::IsMember({"bpe", "bytes"}))
      ->capture_default_str();
  CLI::Option* vocab_option =
      cmd->add_option("--vocab-size", *vocab_size, "BPE vocabulary size (bpe only)")->capture_default_str();
  cmd->add_option("--valid-fraction", options->valid_fraction, "fraction of documents held out for validation")
      ->capture_default_str();
  cmd->add_option("--seed", options->seed, "seed of the train/valid split")->capture_default_str();
  cmd->add_flag("--verbose", options->verbose, "show sentencepiece's training log");

  cmd->callback([options, inputs, vocab_size, vocab_option] {
    PrepareOptions run = *options;
    if (!inputs->empty()) run.inputs = *inputs;
    // Only a vocab size the user typed reaches PrepareOptions, so `--tokenizer bytes --vocab-size N`
    // is reported instead of silently ignored.
    if (vocab_option->count() > 0) run.vocab_size = *vocab_size;
    run.progress = [](const std::string& line) { log_info("prepare: {}", line); };
    PrepareSummary summary = prepare_corpus(run);
    fmt::print("{}", format_prepare_summary(summary));
  });
}

}  // namespace moe4d
