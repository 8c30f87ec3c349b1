// data/text_document_reader.h — plain-text documents cut at separator lines.
//
// Separators (`prepare --doc-separator`):
//   blank-line  one or more blank lines end a document (the default for .txt, .md and .rst files)
//   percent     a line holding only '%' (the fortunes format; the default for any other text file,
//               where a file without such lines is one document)
//   line        every line is a document
//   none        the whole file is one document
//   any other   a line equal to that string (after dropping its line break) ends a document
// Documents keep their line breaks; separator lines are not part of any document.
#pragma once

#include <memory>
#include <string>

#include "data/document_reader.h"
#include "data/line_reader.h"

namespace moe4d {

enum class SeparatorKind { kBlankLine, kPercent, kLine, kNone, kLiteral };

struct DocumentSeparator {
  SeparatorKind kind = SeparatorKind::kPercent;
  std::string literal;  // kLiteral only

  // "blank-line" | "percent" | "line" | "none" | any other non-empty string (a literal line).
  // Throws moe4d::Error for an empty string.
  static DocumentSeparator parse(const std::string& spec);
  // The default for a file (its compression extension already stripped).
  static DocumentSeparator default_for(const std::string& path);
  std::string describe() const;
};

class TextDocumentReader final : public DocumentReader {
 public:
  TextDocumentReader(std::unique_ptr<LineReader> lines, DocumentSeparator separator);
  bool next(std::string& document) override;

 private:
  bool is_separator(std::string_view line) const;

  std::unique_ptr<LineReader> lines_;
  DocumentSeparator separator_;
};

}  // namespace moe4d
