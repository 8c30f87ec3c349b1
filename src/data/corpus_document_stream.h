// data/corpus_document_stream.h — every document of a list of corpus files, one at a time.
//
// For each file: open it through its decompressor (data/compressed_reader.h), skip it if its first
// bytes look binary (counted), pick the reader by `format` ("auto": .jsonl/.ndjson/.json are JSON
// lines, everything else text; the compression extension is looked through, so a.jsonl.zst is
// JSONL) and hand out its documents in order. Memory is bounded by one document plus one buffer.
// Not thread-safe: `prepare` reads on one thread and tokenizes on others.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/document_reader.h"
#include "data/text_document_reader.h"

namespace moe4d {

struct CorpusFormatOptions {
  std::string format = "auto";                  // auto | text | jsonl
  std::optional<DocumentSeparator> separator;   // text files; unset: DocumentSeparator::default_for
  std::string json_key = "text";
  bool skip_bad_lines = false;

  // Throws moe4d::Error for an unknown format or an empty json_key.
  void check() const;
};

struct CorpusCounts {
  int64_t files = 0;          // files read (binary ones excluded)
  int64_t binary_files = 0;   // skipped because they looked binary
  int64_t bad_lines = 0;      // JSONL lines skipped under skip_bad_lines
  int64_t file_bytes = 0;     // bytes read from disk (compressed size for compressed files)
  int64_t text_bytes = 0;     // decompressed bytes
  int64_t documents = 0;
};

class CorpusDocumentStream {
 public:
  CorpusDocumentStream(std::vector<std::string> files, CorpusFormatOptions options);
  ~CorpusDocumentStream();

  // The next document, or false after the last file.
  bool next(std::string& document);
  // Counts so far (file_bytes and text_bytes include the file being read).
  CorpusCounts counts() const;
  const std::vector<std::string>& files() const { return files_; }

 private:
  bool open_next_file();
  void close_file();

  std::vector<std::string> files_;
  CorpusFormatOptions options_;
  size_t next_file_ = 0;
  LineReader* lines_ = nullptr;  // owned by reader_
  std::unique_ptr<DocumentReader> reader_;
  CorpusCounts done_;  // of closed files
};

}  // namespace moe4d
