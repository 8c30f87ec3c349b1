// cli/cmd_prepare.cc — `moe4d prepare`: tokenizer + train/valid token shards from a corpus.
// Maps the flags onto data::PrepareOptions (data/prepare.h); progress goes to stderr through the
// log (and a progress bar when stderr is a terminal), the final summary to stdout.
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "core/log.h"
#include "data/prepare.h"
#include "train/metrics.h"

namespace moe4d {
namespace {

// "[#########-----------]  45%  12.3 MB/s  ETA 1m02s  1.20M tokens" on one rewritten line when
// stderr is a terminal; otherwise a log line every 10 s, so redirected output stays readable.
void show_progress(const PrepareProgress& p) {
  static double last_line = -10;
  const double fraction = p.file_bytes_total > 0 ? std::min(1.0, double(p.file_bytes_done) / p.file_bytes_total) : 1.0;
  const double rate = p.seconds > 0 ? p.file_bytes_done / p.seconds : 0.0;
  const double eta = rate > 0 ? (p.file_bytes_total - p.file_bytes_done) / rate : 0.0;
  const std::string stats = fmt::format("{:3.0f}%  {:.1f} MB/s  ETA {}  {} documents  {} tokens", 100 * fraction,
                                        rate / 1e6, format_duration(eta), format_count(double(p.documents)),
                                        format_count(double(p.tokens)));
  if (::isatty(STDERR_FILENO)) {
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(fraction * kWidth);
    std::fprintf(stderr, "\r[%s%s] %s   ", std::string(filled, '#').c_str(), std::string(kWidth - filled, '-').c_str(),
                 stats.c_str());
    if (p.final) std::fputc('\n', stderr);
    std::fflush(stderr);
  } else if (p.final || p.seconds - last_line >= 10) {
    last_line = p.seconds;
    log_info("prepare: {}", stats);
  }
}

}  // namespace

void add_prepare_command(CLI::App& app) {
  auto options = std::make_shared<PrepareOptions>();
  auto inputs = std::make_shared<std::vector<std::string>>();
  auto vocab_size = std::make_shared<int>(kDefaultBpeVocabSize);
  auto separator = std::make_shared<std::string>();

  CLI::App* cmd = app.add_subcommand(
      "prepare", "tokenize a corpus (text, JSONL, .gz/.xz/.zst) into train/valid token shards (moe4d or Megatron)");
  cmd->add_option("--input", *inputs,
                  fmt::format("corpus file or directory (read recursively); repeatable (default: {}, the Debian "
                              "`fortunes` texts)",
                              kDefaultCorpusDir));
  cmd->add_option("--output", options->output_dir,
                  "output directory (tokenizer.model, train.bin/.json, valid.bin/.json)")
      ->required();
  cmd->add_option("--format", options->format.format,
                  "input format: auto (.jsonl/.ndjson/.json are JSON lines, anything else text), text or jsonl")
      ->check(CLI::IsMember({"auto", "text", "jsonl"}))
      ->capture_default_str();
  CLI::Option* separator_option = cmd->add_option("--doc-separator", *separator,
                  "text documents end at: blank-line (default for .txt/.md/.rst), percent ('%' lines, default "
                  "otherwise), line, none, or a line equal to the given text");
  cmd->add_option("--json-key", options->format.json_key, "JSONL member holding the document text")
      ->capture_default_str();
  cmd->add_flag("--skip-bad-lines", options->format.skip_bad_lines,
                "skip (and count) JSONL lines that are not JSON or lack the key, instead of failing");
  cmd->add_option("--include", options->filter.include,
                  "glob of files to read inside directories (name, or relative path if it holds '/'); repeatable");
  cmd->add_option("--exclude", options->filter.exclude, "glob of files to skip inside directories; repeatable");
  cmd->add_option("--tokenizer", options->tokenizer, "bpe: train a byte-fallback BPE tokenizer; bytes: byte ids")
      ->check(CLI::IsMember({"bpe", "bytes"}))
      ->capture_default_str();
  cmd->add_option("--tokenizer-model", options->tokenizer_model,
                  "reuse this sentencepiece .model or Hugging Face tokenizer.json (byte-level BPE) instead of "
                  "training one (copied to the output directory)");
  CLI::Option* vocab_option =
      cmd->add_option("--vocab-size", *vocab_size, "BPE vocabulary size (bpe only)")->capture_default_str();
  cmd->add_option("--bpe-sample-bytes", options->bpe_sample_bytes,
                  "BPE trains on a deterministic sample of train documents up to this many bytes")
      ->capture_default_str();
  cmd->add_option("--valid-fraction", options->valid_fraction,
                  "fraction of documents held out for validation; 0: no validation split (no valid shard)")
      ->capture_default_str();
  auto min_valid = std::make_shared<int64_t>(1);
  CLI::Option* min_valid_option = cmd->add_option(
      "--min-valid-documents", *min_valid,
      "at least this many documents are held out (a small corpus then gets a larger share, with a warning)")
      ->capture_default_str();
  cmd->add_option("--seed", options->seed, "seed of the train/valid split and the BPE sample")->capture_default_str();
  cmd->add_option("--output-format", options->output_format,
                  "moe4d (.bin + .json header) or megatron (Megatron-LM's .bin + .idx indexed dataset)")
      ->check(CLI::IsMember({"moe4d", "megatron"}))
      ->capture_default_str();
  cmd->add_option("--shard-size", options->shard_size,
                  "tokens per output shard (train-00000, train-00001, ...); 0: one shard per split")
      ->capture_default_str();
  cmd->add_option("--workers", options->workers, "tokenizer threads")->capture_default_str();
  cmd->add_flag("--verbose", options->verbose, "show sentencepiece's training log");

  cmd->callback([options, inputs, vocab_size, vocab_option, separator, separator_option, min_valid,
                 min_valid_option] {
    PrepareOptions run = *options;
    if (!inputs->empty()) run.inputs = *inputs;
    else
      log_info("prepare: no --input given: reading the demo corpus {} (the Debian `fortunes` texts); pass --input "
               "FILE|DIR for your own corpus",
               kDefaultCorpusDir);
    if (min_valid_option->count() > 0) run.min_valid_documents = *min_valid;
    // Only a vocab size the user typed reaches PrepareOptions, so `--tokenizer bytes --vocab-size N`
    // is reported instead of silently ignored.
    if (vocab_option->count() > 0) run.vocab_size = *vocab_size;
    if (separator_option->count() > 0) run.format.separator = DocumentSeparator::parse(*separator);
    run.progress = [](const std::string& line) { log_info("prepare: {}", line); };
    run.progress_bar = show_progress;
    PrepareSummary summary = prepare_corpus(run);
    fmt::print("{}", format_prepare_summary(summary));
  });
}

}  // namespace moe4d
