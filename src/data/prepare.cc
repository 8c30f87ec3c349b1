// data/prepare.cc — prepare_corpus: list, sample + train the tokenizer, stream-encode, write, verify.
#include "data/prepare.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <queue>

#include "core/error.h"
#include "core/log.h"
#include "core/rng.h"
#include "core/sha256.h"
#include "data/atomic_file.h"
#include "data/bpe_trainer.h"
#include "data/byte_tokenizer.h"
#include "data/megatron_indexed_dataset.h"
#include "data/parallel_encoder.h"
#include "data/sharded_token_writer.h"
#include "data/token_dataset.h"
#include "data/tokenizer.h"
#include "data/tokenizer_identity.h"
#include "data/validation_split.h"

namespace moe4d {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Documents are handed to the encoder in batches of about this many bytes (or documents).
constexpr int64_t kBatchBytes = int64_t(1) << 20;
constexpr size_t kBatchDocuments = 1024;
// Encoded documents held back while a small corpus's split is undecided (validation_split.h).
constexpr int64_t kMaxPendingTokens = int64_t(16) << 20;

void check_options(const PrepareOptions& options) {
  if (options.output_dir.empty()) fail("prepare: no output directory given (expected --output DIR)");
  if (options.tokenizer != "bpe" && options.tokenizer != "bytes")
    fail("prepare: tokenizer \"{}\" is not supported (expected \"bpe\" or \"bytes\")", options.tokenizer);
  if (options.tokenizer == "bytes" && options.vocab_size)
    fail(
        "prepare: vocab size {} was given, but the bytes tokenizer has a fixed vocabulary of {} ids (use "
        "--tokenizer bpe to choose a vocab size)",
        *options.vocab_size, ByteTokenizer::kVocabSize);
  if (!options.tokenizer_model.empty()) {
    if (options.tokenizer == "bytes")
      fail("prepare: --tokenizer bytes and --tokenizer-model {} were both given (expected one tokenizer)",
           options.tokenizer_model);
    if (options.vocab_size)
      fail("prepare: vocab size {} was given with --tokenizer-model {}, whose vocabulary is fixed (drop --vocab-size)",
           *options.vocab_size, options.tokenizer_model);
  }
  if (!(options.valid_fraction >= 0.0 && options.valid_fraction < 1.0))
    fail("prepare: valid fraction {} is outside [0, 1) (0: no validation split)", options.valid_fraction);
  if (options.workers < 1 || options.workers > 256)
    fail("prepare: workers {} is outside [1, 256]", options.workers);
  if (options.shard_size < 0) fail("prepare: shard size {} is negative (expected tokens per shard, 0: one shard)",
                                   options.shard_size);
  if (options.bpe_sample_bytes < 1) fail("prepare: BPE sample size {} must be positive", options.bpe_sample_bytes);
  parse_token_format(options.output_format, "prepare --output-format");
  options.format.check();
}

void make_output_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("cannot create output directory {}: {}", dir, ec.message());
  if (!fs::is_directory(dir, ec)) fail("output path {} exists and is not a directory", dir);
  if (::access(dir.c_str(), W_OK) != 0) fail("output directory {} is not writable", dir);
}

int64_t total_file_bytes(const std::vector<std::string>& files) {
  int64_t total = 0;
  std::error_code ec;
  for (const std::string& f : files) {
    auto size = fs::file_size(f, ec);
    if (!ec) total += static_cast<int64_t>(size);
  }
  return total;
}

// Pass 1 for BPE: the train documents with the smallest hash(seed, index), up to `budget` bytes.
struct Sampled {
  uint64_t key;
  int64_t index;
  std::string text;
  bool operator<(const Sampled& other) const { return key < other.key; }
};

std::vector<std::string> sample_bpe_lines(const std::vector<std::string>& files, const CorpusFormatOptions& format,
                                          ValidationSplit& split, uint64_t seed, int64_t budget) {
  const uint64_t key = hash_combine(seed, hash_string("bpe sample"));
  std::priority_queue<Sampled> kept;  // the largest key on top, evicted first
  int64_t kept_bytes = 0, documents = 0;
  CorpusDocumentStream stream(files, format);
  std::string document;
  for (; stream.next(document); ++documents) {
    if (split.drawn_valid(documents)) continue;
    const uint64_t k = hash_combine(key, static_cast<uint64_t>(documents));
    if (kept_bytes >= budget && !kept.empty() && k >= kept.top().key) continue;
    kept_bytes += static_cast<int64_t>(document.size());
    kept.push({k, documents, std::move(document)});
    while (kept_bytes > budget && kept.size() > 1) {
      kept_bytes -= static_cast<int64_t>(kept.top().text.size());
      kept.pop();
    }
  }
  std::vector<Sampled> chosen;
  while (!kept.empty()) {
    chosen.push_back(std::move(const_cast<Sampled&>(kept.top())));
    kept.pop();
  }
  const CorpusCounts counts = stream.counts();
  if (documents == 0)
    fail("corpus is empty: {} input files ({} bytes) hold no documents", counts.files, counts.file_bytes);
  // A small corpus's split is decided by the minimum count rule, which may hold out more (and
  // rejects a corpus too small to split before any training time is spent).
  if (!split.streaming(documents)) {
    std::vector<bool> is_valid = split.small_corpus(documents);
    std::erase_if(chosen, [&](const Sampled& s) { return is_valid[size_t(s.index)]; });
  }
  std::sort(chosen.begin(), chosen.end(), [](const Sampled& a, const Sampled& b) { return a.index < b.index; });
  std::vector<std::string> lines;
  for (const Sampled& s : chosen)
    for (std::string& line : split_lines_keep_newlines(s.text)) lines.push_back(std::move(line));
  return lines;
}

// Routes encoded documents to the train/valid writers, holding a small corpus back until its
// size is known (see data/validation_split.h).
class SplitRouter {
 public:
  SplitRouter(ValidationSplit& split, ShardedTokenWriter& train, ShardedTokenWriter& valid)
      : split_(split), train_(train), valid_(valid) {}

  void add(std::span<const int> ids) {
    const int64_t index = documents_++;
    if (streaming_) {
      route(index, ids, split_.drawn_valid(index));
      return;
    }
    pending_ends_.push_back(static_cast<int64_t>(pending_.size()) + static_cast<int64_t>(ids.size()));
    pending_.insert(pending_.end(), ids.begin(), ids.end());
    if (split_.streaming(documents_) || static_cast<int64_t>(pending_.size()) > kMaxPendingTokens) {
      streaming_ = true;
      flush([&](int64_t i) { return split_.drawn_valid(i); });
    }
  }

  // Returns the split note (empty unless the minimum count rule overrode the fraction).
  std::string finish(const CorpusCounts& counts) {
    if (documents_ == 0)
      fail("corpus is empty: {} input files ({} bytes) hold no documents", counts.files, counts.file_bytes);
    if (!streaming_) {
      std::vector<bool> is_valid = split_.small_corpus(documents_);
      flush([&](int64_t i) { return bool(is_valid[size_t(i)]); });
      return split_.note();
    }
    if (valid_.num_documents() < split_.min_valid())
      fail("the validation split got {} of {} documents, fewer than --min-valid-documents {} (raise --valid-fraction)",
           valid_.num_documents(), documents_, split_.min_valid());
    return "";
  }

 private:
  void route(int64_t, std::span<const int> ids, bool valid) { (valid ? valid_ : train_).add_document(ids); }
  template <typename IsValid>
  void flush(IsValid is_valid) {
    int64_t begin = 0;
    const int64_t first = documents_ - static_cast<int64_t>(pending_ends_.size());
    for (size_t k = 0; k < pending_ends_.size(); ++k) {
      const int64_t end = pending_ends_[k];
      route(first + int64_t(k), std::span<const int>(pending_.data() + begin, size_t(end - begin)),
            is_valid(first + int64_t(k)));
      begin = end;
    }
    pending_.clear();
    pending_.shrink_to_fit();
    pending_ends_.clear();
  }

  ValidationSplit& split_;
  ShardedTokenWriter& train_;
  ShardedTokenWriter& valid_;
  bool streaming_ = false;
  int64_t documents_ = 0;
  std::vector<int> pending_;
  std::vector<int64_t> pending_ends_;
};

struct Tokenizing {
  std::unique_ptr<Tokenizer> tokenizer;
  std::string header_spec;      // what moe4d shard headers record
  TokenizerIdentity identity;   // and which tokenizer that is (data/tokenizer_identity.h)
};

Tokenizing make_tokenizer(const PrepareOptions& options, const std::vector<std::string>& files,
                          ValidationSplit& split, PrepareSummary& summary,
                          const std::function<void(const std::string&)>& say) {
  if (!options.tokenizer_model.empty()) {
    std::unique_ptr<Tokenizer> reused = load_tokenizer(options.tokenizer_model);  // validates the model
    // A Hugging Face tokenizer.json keeps its name; a sentencepiece model becomes tokenizer.model.
    const std::string file_name = is_hf_tokenizer_file(options.tokenizer_model) ? "tokenizer.json" : "tokenizer.model";
    const std::string model_path = (fs::path(options.output_dir) / file_name).string();
    std::error_code ec;
    if (!fs::equivalent(options.tokenizer_model, model_path, ec)) {
      std::ifstream in(options.tokenizer_model, std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      // A copy beside the shards keeps the output directory movable as a whole.
      write_file_atomically(model_path, bytes);
    }
    say(fmt::format("reusing tokenizer {} ({} ids), copied to {}", options.tokenizer_model, reused->vocab_size(),
                    model_path));
    std::unique_ptr<Tokenizer> copy = load_tokenizer(model_path);
    const TokenizerIdentity identity = tokenizer_identity_of(*copy);
    return {std::move(copy), file_name, identity};
  }
  if (options.tokenizer == "bytes") return {load_tokenizer("bytes"), "bytes", tokenizer_identity_of("bytes")};
  const int vocab_size = options.vocab_size.value_or(kDefaultBpeVocabSize);
  const Clock::time_point t0 = Clock::now();
  std::vector<std::string> lines = sample_bpe_lines(files, options.format, split, options.seed, options.bpe_sample_bytes);
  say(fmt::format("training BPE tokenizer, vocab size {}, on a sample of {} lines", vocab_size, lines.size()));
  BpeTrainOptions train_options;
  train_options.verbose = options.verbose;
  std::string written = train_bpe_tokenizer_on_lines(std::move(lines), vocab_size,
                                                     (fs::path(options.output_dir) / "tokenizer").string(),
                                                     options.seed, "the train documents", train_options);
  summary.tokenizer_seconds = seconds_since(t0);
  say(fmt::format("wrote {}", written));
  return {load_tokenizer(written), fs::path(written).filename().string(), tokenizer_identity_of(written)};
}

// Re-reads a written moe4d shard from disk in blocks — its SHA-256 against the header and every id
// against vocab_size — without mapping it, so a shard larger than memory is checked in bounded
// memory (a full mapping would count the whole shard as resident).
void verify_written_shard(const std::string& bin_path) {
  const TokenShardPaths paths = token_shard_paths(bin_path);
  const TokenShardHeader header = read_token_shard_header(paths.json);
  TokenDataset::open(bin_path, /*verify=*/false);  // size and header checks, nothing read yet
  std::FILE* file = std::fopen(paths.bin.c_str(), "rb");
  if (!file) fail("cannot re-read token shard {}", paths.bin);
  Sha256 hasher;
  const size_t item = token_dtype_size(header.dtype);
  std::vector<unsigned char> block(size_t(1) << 20);
  int64_t index = 0;
  for (size_t got; (got = std::fread(block.data(), 1, block.size(), file)) > 0;) {
    hasher.update(block.data(), got);
    for (size_t i = 0; i + item <= got; i += item, ++index) {
      uint32_t id = 0;
      std::memcpy(&id, block.data() + i, item);  // little-endian, as written
      if (id >= uint64_t(header.vocab_size)) {
        std::fclose(file);
        fail("token shard {} holds id {} at index {}, outside [0, {})", paths.bin, id, index, header.vocab_size);
      }
    }
  }
  const bool error = std::ferror(file);
  std::fclose(file);
  if (error) fail("error while re-reading token shard {}", paths.bin);
  if (hasher.hex_digest() != header.sha256)
    fail("token shard {} does not match the SHA-256 in {} after writing (disk or filesystem error)", paths.bin,
         paths.json);
}

}  // namespace

PrepareSummary prepare_corpus(const PrepareOptions& options) {
  const Clock::time_point start = Clock::now();
  auto say = [&](const std::string& line) {
    if (options.progress) options.progress(fmt::format("{} ({:.1f} s)", line, seconds_since(start)));
  };
  check_options(options);
  if (options.tokenizer == "bpe" && options.tokenizer_model.empty())
    check_bpe_vocab_size(options.vocab_size.value_or(kDefaultBpeVocabSize));  // before the corpus is read
  std::error_code ec;
  if (options.inputs == std::vector<std::string>{kDefaultCorpusDir} && !fs::exists(kDefaultCorpusDir, ec))
    fail("default corpus {} not found (install the Debian package `fortunes`, or pass --input FILE|DIR)",
         kDefaultCorpusDir);
  const std::vector<std::string> files = list_corpus_files(options.inputs, options.filter);
  make_output_dir(options.output_dir);
  const TokenFormat format = parse_token_format(options.output_format, "prepare --output-format");
  const bool no_valid = options.valid_fraction == 0.0;
  ValidationSplit split(options.valid_fraction, options.min_valid_documents.value_or(no_valid ? 0 : 1), options.seed);

  PrepareSummary summary;
  summary.inputs = options.inputs;
  summary.default_corpus = options.inputs == std::vector<std::string>{kDefaultCorpusDir};
  summary.output_format = options.output_format;
  Tokenizing tk = make_tokenizer(options, files, split, summary, say);
  const Tokenizer& tokenizer = *tk.tokenizer;
  summary.vocab_size = tokenizer.vocab_size();
  summary.tokenizer_spec = tokenizer.spec();
  summary.tokenizer_name = tokenizer.name();

  // The encoding pass.
  const Clock::time_point t0 = Clock::now();
  ShardedTokenWriter train(options.output_dir, "train", format, tokenizer.vocab_size(), tk.header_spec, tk.identity,
                           options.shard_size);
  ShardedTokenWriter valid(options.output_dir, "valid", format, tokenizer.vocab_size(), tk.header_spec, tk.identity,
                           options.shard_size);
  SplitRouter router(split, train, valid);
  // Only sentencepiece replaces invalid UTF-8 (by U+FFFD); bytes and byte-level BPE keep every byte.
  ParallelEncoder encoder(tokenizer, options.workers, tk.identity.kind == "sentencepiece");
  CorpusDocumentStream stream(files, options.format);
  PrepareProgress progress{.file_bytes_total = total_file_bytes(files)};
  double last_report = -1;
  auto report = [&](bool final) {
    if (!options.progress_bar) return;
    progress.seconds = seconds_since(t0);
    if (!final && progress.seconds - last_report < 0.5) return;
    last_report = progress.seconds;
    progress.file_bytes_done = stream.counts().file_bytes;
    progress.final = final;
    options.progress_bar(progress);
  };
  EncodedBatch batch;
  // Writes every finished batch; with `wait`, first blocks for the oldest one.
  auto consume = [&](bool wait) {
    for (bool block = wait; encoder.next(batch, block); block = false) {
      int64_t begin = 0;
      for (int64_t end : batch.ends) {
        router.add(std::span<const int>(batch.ids.data() + begin, size_t(end - begin)));
        begin = end;
      }
      summary.document_bytes += batch.text_bytes;
      summary.invalid_utf8_documents += batch.invalid_utf8;
      progress.documents += static_cast<int64_t>(batch.ends.size());
      progress.tokens += static_cast<int64_t>(batch.ids.size());
    }
  };
  std::vector<std::string> documents;
  int64_t batch_bytes = 0;
  std::string document;
  for (bool more = true; more;) {
    more = stream.next(document);
    if (more) {
      batch_bytes += static_cast<int64_t>(document.size());
      documents.push_back(std::move(document));
    }
    if (!documents.empty() && (!more || batch_bytes >= kBatchBytes || documents.size() >= kBatchDocuments)) {
      while (encoder.full()) consume(/*wait=*/true);
      encoder.submit(std::move(documents));
      documents.clear();
      batch_bytes = 0;
      consume(/*wait=*/false);
      report(false);
    }
  }
  while (encoder.in_flight() > 0) consume(/*wait=*/true);
  const CorpusCounts counts = stream.counts();
  summary.split_note = router.finish(counts);
  if (!summary.split_note.empty()) log_warn("prepare: {}", summary.split_note);
  summary.train_shards = train.finish();
  if (no_valid)
    valid.remove_stale();  // a valid.* of an earlier run must not pass for this run's
  else
    summary.valid_shards = valid.finish();
  summary.encode_seconds = seconds_since(t0);
  report(true);

  summary.files = counts.files;
  summary.binary_files = counts.binary_files;
  summary.bad_lines = counts.bad_lines;
  summary.bytes = counts.file_bytes;
  summary.text_bytes = counts.text_bytes;
  summary.documents = counts.documents;
  summary.train_documents = train.num_documents();
  summary.valid_documents = valid.num_documents();
  summary.train_tokens = train.num_tokens();
  summary.valid_tokens = valid.num_tokens();
  summary.train_path = train.data_path();
  if (!no_valid) summary.valid_path = valid.data_path();
  for (const std::string& s : summary.train_shards) say(fmt::format("wrote {}", s));
  for (const std::string& s : summary.valid_shards) say(fmt::format("wrote {}", s));

  // Read back what was written: moe4d shards with the checksum and every id checked, Megatron
  // indexes validated completely.
  for (const auto* shards : {&summary.train_shards, &summary.valid_shards})
    for (const std::string& s : *shards) {
      if (format == TokenFormat::kMegatron)
        MegatronIndexedDataset(s, tokenizer.vocab_size());
      else
        verify_written_shard(s);
    }
  summary.seconds = seconds_since(start);
  return summary;
}

std::string format_prepare_summary(const PrepareSummary& s) {
  const int64_t tokens = s.train_tokens + s.valid_tokens;
  const double bytes_per_token = tokens > 0 ? static_cast<double>(s.document_bytes) / tokens : 0.0;
  std::string out;
  std::string where;
  for (const std::string& input : s.inputs) where += (where.empty() ? "" : ", ") + input;
  if (s.default_corpus) where += " (the demo corpus: no --input was given)";
  out += fmt::format("input:     {}\n", where);
  out += fmt::format("corpus:    {} files, {:.2f} MB on disk, {:.2f} MB of text, {} documents ({} train, {} valid)\n",
                     s.files, s.bytes / 1e6, s.text_bytes / 1e6, s.documents, s.train_documents, s.valid_documents);
  out += fmt::format("skipped:   {} binary files, {} bad JSONL lines\n", s.binary_files, s.bad_lines);
  if (s.invalid_utf8_documents > 0)
    out += fmt::format("warning:   {} documents hold invalid UTF-8 (the tokenizer encodes those bytes as U+FFFD)\n",
                       s.invalid_utf8_documents);
  if (!s.split_note.empty()) out += fmt::format("warning:   {}\n", s.split_note);
  out += fmt::format("tokenizer: {}\n", s.tokenizer_name);
  out += fmt::format("train:     {} ({} tokens, {} shard{}, {} format)\n", s.train_path, s.train_tokens,
                     s.train_shards.size(), s.train_shards.size() == 1 ? "" : "s", s.output_format);
  if (s.valid_path.empty())
    out += "valid:     none (--valid-fraction 0: leave data.valid out of the config)\n";
  else
    out += fmt::format("valid:     {} ({} tokens, {} shard{})\n", s.valid_path, s.valid_tokens,
                       s.valid_shards.size(), s.valid_shards.size() == 1 ? "" : "s");
  out += fmt::format("ratio:     {:.2f} bytes per token (end-of-sequence ids included)\n", bytes_per_token);
  const double rate = s.encode_seconds > 0 ? tokens / s.encode_seconds : 0.0;
  if (s.tokenizer_seconds > 0)
    out += fmt::format("time:      {:.1f} s ({:.1f} s training the tokenizer, {:.1f} s encoding: {:.0f} tokens/s)\n",
                       s.seconds, s.tokenizer_seconds, s.encode_seconds, rate);
  else
    out += fmt::format("time:      {:.1f} s ({:.1f} s encoding: {:.0f} tokens/s)\n", s.seconds, s.encode_seconds, rate);
  if (s.output_format == "megatron")
    out += fmt::format("model:     set model.vocab_size >= {}, data.format: megatron and data.tokenizer: {}\n",
                       s.vocab_size, s.tokenizer_spec);
  else
    out += fmt::format("model:     set model.vocab_size >= {} and data.tokenizer: {}\n", s.vocab_size,
                       s.tokenizer_spec);
  return out;
}

}  // namespace moe4d
