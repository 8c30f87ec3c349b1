// data/text_document_reader.cc — separator rules for plain-text corpora.
#include "data/text_document_reader.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"

namespace moe4d {
namespace {

std::string_view without_line_break(std::string_view line) {
  if (line.ends_with('\n')) line.remove_suffix(1);
  if (line.ends_with('\r')) line.remove_suffix(1);
  return line;
}

}  // namespace

bool is_blank_text(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; });
}

DocumentSeparator DocumentSeparator::parse(const std::string& spec) {
  if (spec.empty())
    fail("document separator is empty (expected blank-line, percent, line, none or a separator line's text)");
  if (spec == "blank-line") return {SeparatorKind::kBlankLine, ""};
  if (spec == "percent") return {SeparatorKind::kPercent, ""};
  if (spec == "line") return {SeparatorKind::kLine, ""};
  if (spec == "none") return {SeparatorKind::kNone, ""};
  return {SeparatorKind::kLiteral, spec};
}

DocumentSeparator DocumentSeparator::default_for(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".txt" || ext == ".md" || ext == ".rst" || ext == ".text") return {SeparatorKind::kBlankLine, ""};
  return {SeparatorKind::kPercent, ""};
}

std::string DocumentSeparator::describe() const {
  switch (kind) {
    case SeparatorKind::kBlankLine: return "blank-line";
    case SeparatorKind::kPercent: return "percent";
    case SeparatorKind::kLine: return "line";
    case SeparatorKind::kNone: return "none";
    case SeparatorKind::kLiteral: break;
  }
  return fmt::format("the line \"{}\"", literal);
}

TextDocumentReader::TextDocumentReader(std::unique_ptr<LineReader> lines, DocumentSeparator separator)
    : lines_(std::move(lines)), separator_(std::move(separator)) {}

bool TextDocumentReader::is_separator(std::string_view line) const {
  switch (separator_.kind) {
    case SeparatorKind::kBlankLine: return is_blank_text(line);
    case SeparatorKind::kPercent: return without_line_break(line) == "%";
    case SeparatorKind::kLiteral: return without_line_break(line) == separator_.literal;
    case SeparatorKind::kLine:
    case SeparatorKind::kNone: break;
  }
  return false;
}

bool TextDocumentReader::next(std::string& document) {
  document.clear();
  std::string_view line;
  while (lines_->next(line)) {
    if (is_separator(line)) {
      if (!is_blank_text(document)) return true;
      document.clear();
      continue;
    }
    document.append(line);
    const bool full = separator_.kind == SeparatorKind::kLine || document.size() >= kMaxDocumentBytes;
    if (full) {
      if (!is_blank_text(document)) return true;
      document.clear();
    }
  }
  return !is_blank_text(document);
}

}  // namespace moe4d
