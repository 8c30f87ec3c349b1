// data/corpus_document_stream.cc — files -> (decompress, binary check, format) -> documents.
#include "data/corpus_document_stream.h"

#include <filesystem>

#include "core/error.h"
#include "data/compressed_reader.h"
#include "data/jsonl_reader.h"
#include "data/line_reader.h"

namespace moe4d {
namespace {

constexpr size_t kBinaryProbeBytes = 8192;

bool is_jsonl_name(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  return ext == ".jsonl" || ext == ".ndjson" || ext == ".json";
}

}  // namespace

void CorpusFormatOptions::check() const {
  if (format != "auto" && format != "text" && format != "jsonl")
    fail("corpus format \"{}\" is not supported (expected auto, text or jsonl)", format);
  if (json_key.empty()) fail("JSON key is empty (expected the name of the member holding the text, e.g. text)");
}

CorpusDocumentStream::CorpusDocumentStream(std::vector<std::string> files, CorpusFormatOptions options)
    : files_(std::move(files)), options_(std::move(options)) {
  options_.check();
}

CorpusDocumentStream::~CorpusDocumentStream() = default;

void CorpusDocumentStream::close_file() {
  if (!reader_) return;
  done_.file_bytes += lines_->file_bytes_read();
  done_.text_bytes += lines_->bytes_consumed();
  done_.bad_lines += reader_->skipped_lines();
  reader_.reset();
  lines_ = nullptr;
}

bool CorpusDocumentStream::open_next_file() {
  close_file();
  while (next_file_ < files_.size()) {
    const std::string& path = files_[next_file_++];
    auto lines = std::make_unique<LineReader>(open_byte_reader(path), path);
    if (looks_binary(lines->peek(kBinaryProbeBytes))) {
      ++done_.binary_files;
      done_.file_bytes += lines->file_bytes_read();
      continue;
    }
    ++done_.files;
    const std::string inner = strip_compression_extension(path);
    const bool jsonl = options_.format == "jsonl" || (options_.format == "auto" && is_jsonl_name(inner));
    lines_ = lines.get();
    if (jsonl)
      reader_ = std::make_unique<JsonlReader>(std::move(lines), options_.json_key, options_.skip_bad_lines);
    else
      reader_ = std::make_unique<TextDocumentReader>(
          std::move(lines), options_.separator.value_or(DocumentSeparator::default_for(inner)));
    return true;
  }
  return false;
}

bool CorpusDocumentStream::next(std::string& document) {
  for (;;) {
    if (!reader_ && !open_next_file()) return false;
    if (reader_->next(document)) {
      ++done_.documents;
      return true;
    }
    close_file();
  }
}

CorpusCounts CorpusDocumentStream::counts() const {
  CorpusCounts c = done_;
  if (reader_) {
    c.file_bytes += lines_->file_bytes_read();
    c.text_bytes += lines_->bytes_consumed();
    c.bad_lines += reader_->skipped_lines();
  }
  return c;
}

}  // namespace moe4d
