// data/prepare.cc — prepare_corpus: read, split, train tokenizer, encode, write and verify shards.
#include "data/prepare.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "core/error.h"
#include "core/log.h"
#include "core/rng.h"
#include "data/bpe_trainer.h"
#include "data/byte_tokenizer.h"
#include "data/token_dataset.h"
#include "data/token_shard_writer.h"
#include "data/tokenizer.h"

namespace moe4d {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

void check_options(const PrepareOptions& options) {
  if (options.output_dir.empty()) fail("prepare: no output directory given (expected --output DIR)");
  if (options.tokenizer != "bpe" && options.tokenizer != "bytes")
    fail("prepare: tokenizer \"{}\" is not supported (expected \"bpe\" or \"bytes\")", options.tokenizer);
  if (options.tokenizer == "bytes" && options.vocab_size)
    fail(
        "prepare: vocab size {} was given, but the bytes tokenizer has a fixed vocabulary of {} ids (use "
        "--tokenizer bpe to choose a vocab size)",
        *options.vocab_size, ByteTokenizer::kVocabSize);
  if (!(options.valid_fraction > 0.0 && options.valid_fraction < 1.0))
    fail("prepare: valid fraction {} is outside (0, 1)", options.valid_fraction);
}

void make_output_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("cannot create output directory {}: {}", dir, ec.message());
  if (!fs::is_directory(dir, ec)) fail("output path {} exists and is not a directory", dir);
  if (::access(dir.c_str(), W_OK) != 0) fail("output directory {} is not writable", dir);
}

struct Corpus {
  std::vector<std::string> documents;
  int64_t files = 0;
  int64_t bytes = 0;
};

Corpus read_corpus(const std::vector<std::string>& inputs, bool warn_invalid_utf8,
                   const std::function<void(const std::string&)>& say) {
  Corpus corpus;
  std::vector<std::string> files = list_corpus_files(inputs);
  for (const std::string& file : files) {
    std::string text = read_text_file(file);
    if (warn_invalid_utf8) {
      int64_t bad = find_invalid_utf8(text);
      if (bad >= 0)
        log_warn("{} has invalid UTF-8 at byte {}; the BPE tokenizer turns such bytes into U+FFFD", file, bad);
    }
    std::vector<std::string> documents = split_documents(text);
    corpus.bytes += static_cast<int64_t>(text.size());
    for (std::string& d : documents) corpus.documents.push_back(std::move(d));
    ++corpus.files;
  }
  say(fmt::format("read {} files, {:.2f} MB, {} documents", corpus.files, corpus.bytes / 1e6, corpus.documents.size()));
  return corpus;
}

// is_valid[i] for each document: hash(seed, i) < valid_fraction, forced so both splits are non-empty.
std::vector<bool> split_train_valid(int64_t documents, double valid_fraction, uint64_t seed) {
  const uint64_t key = hash_combine(seed, hash_string("train/valid split"));
  std::vector<double> u(static_cast<size_t>(documents));
  std::vector<bool> is_valid(u.size());
  int64_t valid = 0;
  for (int64_t i = 0; i < documents; ++i) {
    u[i] = uniform_from_bits(hash_combine(key, static_cast<uint64_t>(i)));
    is_valid[i] = u[i] < valid_fraction;
    valid += is_valid[i];
  }
  // On a tiny corpus the draw can leave one side empty; move the document closest to the threshold.
  if (valid == 0) is_valid[std::min_element(u.begin(), u.end()) - u.begin()] = true;
  if (valid == documents) is_valid[std::max_element(u.begin(), u.end()) - u.begin()] = false;
  return is_valid;
}

int64_t write_shard(const std::string& path, const Tokenizer& tokenizer, const std::string& header_spec,
                    const std::vector<std::string>& documents, const std::vector<bool>& is_valid, bool want_valid) {
  TokenShardWriter writer(path, tokenizer.vocab_size(), header_spec);
  const int eos = tokenizer.eos_id();
  for (size_t i = 0; i < documents.size(); ++i) {
    if (is_valid[i] != want_valid) continue;
    std::vector<int> ids = tokenizer.encode(documents[i]);
    ids.push_back(eos);
    writer.append(ids);
    writer.end_document();
  }
  writer.finish();
  return writer.num_tokens();
}

}  // namespace

PrepareSummary prepare_corpus(const PrepareOptions& options) {
  const Clock::time_point start = Clock::now();
  auto say = [&](const std::string& line) {
    if (options.progress) options.progress(fmt::format("{} ({:.1f} s)", line, seconds_since(start)));
  };
  check_options(options);
  const bool bpe = options.tokenizer == "bpe";
  const int vocab_size = options.vocab_size.value_or(kDefaultBpeVocabSize);
  if (bpe) check_bpe_vocab_size(vocab_size);  // before the corpus is read and split
  std::error_code ec;
  if (options.inputs == std::vector<std::string>{kDefaultCorpusDir} && !fs::exists(kDefaultCorpusDir, ec))
    fail("default corpus {} not found (install the Debian package `fortunes`, or pass --input FILE|DIR)",
         kDefaultCorpusDir);
  make_output_dir(options.output_dir);

  Corpus corpus = read_corpus(options.inputs, bpe, say);
  if (corpus.documents.empty())
    fail("corpus is empty: {} input files ({} bytes) hold no documents", corpus.files, corpus.bytes);
  if (corpus.documents.size() < 2)
    fail("corpus has only 1 document; at least 2 are needed to split it into train and valid");
  const int64_t documents = static_cast<int64_t>(corpus.documents.size());
  std::vector<bool> is_valid = split_train_valid(documents, options.valid_fraction, options.seed);

  PrepareSummary summary;
  summary.files = corpus.files;
  summary.bytes = corpus.bytes;
  summary.documents = documents;
  for (const std::string& d : corpus.documents) summary.document_bytes += static_cast<int64_t>(d.size());
  for (bool v : is_valid) summary.valid_documents += v;
  summary.train_documents = documents - summary.valid_documents;
  say(fmt::format("split: {} train / {} valid documents", summary.train_documents, summary.valid_documents));

  std::unique_ptr<Tokenizer> tokenizer;
  std::string header_spec;
  if (bpe) {
    say(fmt::format("training BPE tokenizer, vocab size {}", vocab_size));
    const Clock::time_point t0 = Clock::now();
    std::vector<std::string> lines;
    for (int64_t i = 0; i < documents; ++i) {
      if (is_valid[i]) continue;
      for (std::string& line : split_lines_keep_newlines(corpus.documents[i])) lines.push_back(std::move(line));
    }
    BpeTrainOptions train_options;
    train_options.verbose = options.verbose;
    std::string model_path = train_bpe_tokenizer_on_lines(std::move(lines), vocab_size,
                                                          (fs::path(options.output_dir) / "tokenizer").string(),
                                                          options.seed, "the train documents", train_options);
    summary.tokenizer_seconds = seconds_since(t0);
    tokenizer = load_tokenizer(model_path);
    header_spec = fs::path(model_path).filename().string();
    say(fmt::format("wrote {}", model_path));
  } else {
    tokenizer = load_tokenizer("bytes");
    header_spec = "bytes";
  }
  summary.vocab_size = tokenizer->vocab_size();
  summary.tokenizer_spec = tokenizer->spec();
  summary.tokenizer_name = tokenizer->name();

  summary.train_path = (fs::path(options.output_dir) / "train.bin").string();
  summary.valid_path = (fs::path(options.output_dir) / "valid.bin").string();
  summary.train_tokens = write_shard(summary.train_path, *tokenizer, header_spec, corpus.documents, is_valid, false);
  say(fmt::format("wrote {}: {} tokens", summary.train_path, summary.train_tokens));
  summary.valid_tokens = write_shard(summary.valid_path, *tokenizer, header_spec, corpus.documents, is_valid, true);
  say(fmt::format("wrote {}: {} tokens", summary.valid_path, summary.valid_tokens));

  // Read back what was written the way training will, with the checksum and every id checked.
  TokenDataset::open(summary.train_path, /*verify=*/true);
  TokenDataset::open(summary.valid_path, /*verify=*/true);
  summary.seconds = seconds_since(start);
  return summary;
}

std::string format_prepare_summary(const PrepareSummary& s) {
  const double bytes_per_token = s.train_tokens + s.valid_tokens > 0
                                     ? static_cast<double>(s.document_bytes) / (s.train_tokens + s.valid_tokens)
                                     : 0.0;
  std::string out;
  out += fmt::format("corpus:    {} files, {:.2f} MB, {} documents ({} train, {} valid)\n", s.files, s.bytes / 1e6,
                     s.documents, s.train_documents, s.valid_documents);
  out += fmt::format("tokenizer: {}\n", s.tokenizer_name);
  out += fmt::format("train:     {} ({} tokens)\n", s.train_path, s.train_tokens);
  out += fmt::format("valid:     {} ({} tokens)\n", s.valid_path, s.valid_tokens);
  out += fmt::format("ratio:     {:.2f} bytes per token (end-of-sequence ids included)\n", bytes_per_token);
  if (s.tokenizer_seconds > 0)
    out += fmt::format("time:      {:.1f} s ({:.1f} s training the tokenizer)\n", s.seconds, s.tokenizer_seconds);
  else
    out += fmt::format("time:      {:.1f} s\n", s.seconds);
  out += fmt::format("model:     set model.vocab_size >= {} and data.tokenizer: {}\n", s.vocab_size, s.tokenizer_spec);
  return out;
}

}  // namespace moe4d
