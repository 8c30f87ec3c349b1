// data/corpus_reader.cc — corpus file discovery, '%'-separated documents, UTF-8 check.
#include "data/corpus_reader.h"

#include <fnmatch.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_set>

#include "core/error.h"

namespace moe4d {
namespace fs = std::filesystem;
namespace {

bool skipped_in_directory(const fs::directory_entry& entry) {
  std::string name = entry.path().filename().string();
  std::error_code ec;
  if (entry.is_symlink(ec)) return true;  // fortunes' *.u8 links duplicate the real files
  if (!entry.is_regular_file(ec)) return true;
  return name.starts_with(".") || entry.path().extension() == ".dat";
}

bool is_separator(std::string_view line) { return line == "%" || line == "%\r"; }

bool is_blank(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; });
}

}  // namespace

bool CorpusFileFilter::keeps(const std::string& relative_path) const {
  const std::string name = fs::path(relative_path).filename().string();
  auto matches = [&](const std::string& pattern) {
    const std::string& subject = pattern.find('/') == std::string::npos ? name : relative_path;
    return ::fnmatch(pattern.c_str(), subject.c_str(), 0) == 0;
  };
  if (!include.empty() && std::none_of(include.begin(), include.end(), matches)) return false;
  return std::none_of(exclude.begin(), exclude.end(), matches);
}

std::vector<std::string> list_corpus_files(const std::vector<std::string>& inputs) {
  return list_corpus_files(inputs, CorpusFileFilter{});
}

std::vector<std::string> list_corpus_files(const std::vector<std::string>& inputs, const CorpusFileFilter& filter) {
  if (inputs.empty()) fail("no corpus inputs given (expected files or directories of text)");
  std::vector<std::string> files;
  for (const std::string& input : inputs) {
    std::error_code ec;
    fs::file_status status = fs::status(input, ec);
    if (ec || !fs::exists(status)) fail("corpus input {} does not exist", input);
    if (fs::is_directory(status)) {
      std::vector<std::string> found;
      fs::recursive_directory_iterator it(input, fs::directory_options::none, ec), end;
      if (ec) fail("cannot list corpus directory {}: {}", input, ec.message());
      for (; it != end; it.increment(ec)) {
        if (ec) fail("cannot list corpus directory {}: {}", input, ec.message());
        if (it->path().filename().string().starts_with(".") && it->is_directory()) {
          it.disable_recursion_pending();
          continue;
        }
        if (skipped_in_directory(*it)) continue;
        if (!filter.keeps(fs::relative(it->path(), input, ec).generic_string())) continue;
        found.push_back(it->path().string());
      }
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else {
      files.push_back(input);
    }
  }
  // Keep the first occurrence of a file named twice, preserving the order of `inputs`.
  std::vector<std::string> unique;
  std::unordered_set<std::string> seen;
  for (const std::string& f : files)
    if (seen.insert(f).second) unique.push_back(f);
  if (unique.empty()) {
    std::string listed;
    for (const std::string& input : inputs) listed += (listed.empty() ? "" : ", ") + input;
    fail(
        "no corpus files found in {} (directories are searched for text files; *.dat files and symlinks are "
        "skipped{})",
        listed, filter.include.empty() && filter.exclude.empty() ? "" : ", and the --include/--exclude rules apply");
  }
  return unique;
}

std::vector<std::string> split_documents(std::string_view text) {
  std::vector<std::string> documents;
  std::string current;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    size_t next = end == std::string_view::npos ? text.size() : end + 1;
    std::string_view line = text.substr(start, (end == std::string_view::npos ? text.size() : end) - start);
    if (is_separator(line)) {
      if (!is_blank(current)) documents.push_back(std::move(current));
      current.clear();
    } else {
      current.append(text.substr(start, next - start));
    }
    start = next;
  }
  if (!is_blank(current)) documents.push_back(std::move(current));
  return documents;
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read corpus file {}: {}", path, std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail("error while reading corpus file {}", path);
  return text.str();
}

int64_t find_invalid_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    unsigned char c = s[i];
    size_t len = 0;
    uint32_t min = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2, min = 0x80, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, min = 0x800, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, min = 0x10000, cp = c & 0x07;
    } else {
      return static_cast<int64_t>(i);
    }
    if (i + len > n) return static_cast<int64_t>(i);
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return static_cast<int64_t>(i);
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    // Overlong forms, UTF-16 surrogates and code points past U+10FFFF are invalid.
    if (cp < min || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return static_cast<int64_t>(i);
    i += len;
  }
  return -1;
}

}  // namespace moe4d
