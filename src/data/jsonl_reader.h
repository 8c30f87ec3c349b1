// data/jsonl_reader.h — documents from JSON lines ({"text": ...} per line, as HF datasets export
// and Megatron's preprocess_data.py reads).
//
// Each non-blank line must be a JSON object whose `key` member is a string; that string is the
// document and every other member is ignored. Any other line (not JSON, not an object, the key
// missing or not a string) is a moe4d::Error naming the file, the line and what was found — or,
// with skip_bad_lines, skipped and counted. Blank lines are ignored.
#pragma once

#include <memory>
#include <string>

#include "data/document_reader.h"
#include "data/line_reader.h"

namespace moe4d {

class JsonlReader final : public DocumentReader {
 public:
  JsonlReader(std::unique_ptr<LineReader> lines, std::string key, bool skip_bad_lines);
  bool next(std::string& document) override;
  int64_t skipped_lines() const override { return skipped_; }

 private:
  // Why `line` holds no document, or "" if it does (then `document` holds it).
  std::string extract(std::string_view line, std::string& document) const;

  std::unique_ptr<LineReader> lines_;
  std::string key_;
  bool skip_bad_lines_;
  int64_t skipped_ = 0;
};

}  // namespace moe4d
