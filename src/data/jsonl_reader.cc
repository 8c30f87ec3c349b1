// data/jsonl_reader.cc — one JSON object per line, one document per object.
#include "data/jsonl_reader.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace moe4d {

JsonlReader::JsonlReader(std::unique_ptr<LineReader> lines, std::string key, bool skip_bad_lines)
    : lines_(std::move(lines)), key_(std::move(key)), skip_bad_lines_(skip_bad_lines) {}

std::string JsonlReader::extract(std::string_view line, std::string& document) const {
  nlohmann::json value = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return "not valid JSON";
  if (!value.is_object()) return fmt::format("a JSON {}, not an object", value.type_name());
  auto it = value.find(key_);
  if (it == value.end()) return fmt::format("no \"{}\" key", key_);
  if (!it->is_string()) return fmt::format("\"{}\" is a {}, not a string", key_, it->type_name());
  document = it->get_ref<const std::string&>();
  return "";
}

bool JsonlReader::next(std::string& document) {
  std::string_view line;
  while (lines_->next(line)) {
    if (is_blank_text(line)) continue;
    std::string why = extract(line, document);
    if (why.empty()) {
      if (is_blank_text(document)) continue;  // an empty text is no document
      return true;
    }
    if (!skip_bad_lines_)
      fail("{}:{}: {} (expected a JSON object with a string \"{}\" member; --skip-bad-lines skips such lines)",
           lines_->path(), lines_->line_number(), why, key_);
    ++skipped_;
  }
  return false;
}

}  // namespace moe4d
