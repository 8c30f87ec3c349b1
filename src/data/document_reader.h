// data/document_reader.h — the interface of the per-format document readers.
//
// A reader turns one corpus file's lines (data/line_reader.h) into documents: text with separators
// (data/text_document_reader.h) or JSON lines (data/jsonl_reader.h). Documents that are only
// whitespace are never returned. Not thread-safe.
#pragma once

#include <cstdint>
#include <string>

namespace moe4d {

// A document is cut after the first line that takes it past this size, so one file without
// separators cannot hold the whole corpus in memory; the pieces count as separate documents.
inline constexpr size_t kMaxDocumentBytes = size_t(64) << 20;

class DocumentReader {
 public:
  virtual ~DocumentReader() = default;
  // The next document into `document` (replacing its contents); false at the end of the file.
  // Throws moe4d::Error naming the file and line for input the format rejects.
  virtual bool next(std::string& document) = 0;
  // Lines rejected and skipped (JSONL with skip_bad_lines); 0 for text.
  virtual int64_t skipped_lines() const { return 0; }
};

// True if `text` holds only spaces, tabs, CR and LF.
bool is_blank_text(std::string_view text);

}  // namespace moe4d
