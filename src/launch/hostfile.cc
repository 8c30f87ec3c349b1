#include "launch/hostfile.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace moe4d {
namespace {

bool is_host_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
}

// A DNS name or IPv4 address: letters, digits, '.', '-', '_', not starting with '-' or '.'.
bool valid_host(std::string_view host) {
  if (host.empty() || host.size() > 253 || host.front() == '-' || host.front() == '.') return false;
  for (char c : host)
    if (!is_host_char(c)) return false;
  return true;
}

// A positive count without sign, spaces or overflow ("8", not "+8", "8.0" or "0").
bool parse_count(std::string_view text, int* out) {
  if (text.empty() || text.size() > 7) return false;
  int value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + (c - '0');
  }
  if (value <= 0) return false;
  *out = value;
  return true;
}

std::vector<std::string_view> split_words(std::string_view line) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t' && line[j] != '\r') ++j;
    if (j > i) words.push_back(line.substr(i, j - i));
    i = j;
  }
  return words;
}

// Printable form of text for messages: control bytes as '?', at most 80 characters.
std::string printable(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, 80)) out += std::isprint(static_cast<unsigned char>(c)) ? c : '?';
  if (text.size() > 80) out += "...";
  return out;
}
// Built by appending: `"'" + std::string` trips GCC 12's -Wrestrict false positive.
std::string quoted(std::string_view text) {
  std::string out = "'";
  out += printable(text);
  out += '\'';
  return out;
}

// Joins "slots", "=", "8" and "slots=", "8" and "slots", "=8" into "slots=8" tokens.
std::vector<std::string> join_assignments(const std::vector<std::string_view>& words) {
  std::vector<std::string> out;
  for (std::string_view w : words) {
    const bool glue = !out.empty() && (w.front() == '=' || out.back().back() == '=');
    if (glue) out.back() += std::string(w);
    else out.emplace_back(w);
  }
  return out;
}

}  // namespace

std::vector<HostEntry> parse_hostfile(std::string_view text, std::string_view source) {
  std::vector<HostEntry> hosts;
  int line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    const std::string_view full = line;
    if (size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    const auto words = split_words(line);
    if (words.empty()) {
      if (end == text.size()) break;
      continue;
    }
    const auto where = [&] { return fmt::format("{}:{}", source, line_no); };
    const auto expected = "expected 'HOST', 'HOST slots=N [max_slots=M]' or 'HOST:N'";

    HostEntry entry;
    entry.line = line_no;
    std::string_view host = words[0];
    if (size_t colon = host.find(':'); colon != std::string_view::npos) {
      // MPICH form host:N; nothing may follow it.
      if (words.size() > 1 || !parse_count(host.substr(colon + 1), &entry.slots))
        fail("{}: {}: {}", where(), quoted(full), expected);
      host = host.substr(0, colon);
    }
    if (!valid_host(host))
      fail("{}: {}: host name '{}' has characters other than letters, digits, '.', '-', '_'; {}", where(),
           quoted(full), printable(host), expected);
    entry.host = std::string(host);
    const std::vector<std::string> rest = join_assignments({words.begin() + 1, words.end()});
    for (const std::string& token : rest) {
      const size_t eq = token.find('=');
      const std::string key = eq == std::string::npos ? token : token.substr(0, eq);
      const std::string value = eq == std::string::npos ? "" : token.substr(eq + 1);
      int* target = nullptr;
      if (key == "slots" || key == "count") target = &entry.slots;
      else if (key == "max_slots" || key == "max-slots") target = &entry.max_slots;
      else
        fail("{}: {}: unknown keyword '{}' ({}; known keywords: slots, max_slots)", where(), quoted(full),
             printable(key), expected);
      if (eq == std::string::npos || !parse_count(value, target))
        fail("{}: {}: {} needs a positive integer, got {}", where(), quoted(full), key, quoted(value));
    }
    if (entry.max_slots > 0 && entry.slots > entry.max_slots)
      fail("{}: {}: slots={} is more than max_slots={}", where(), quoted(full), entry.slots, entry.max_slots);

    bool merged = false;
    for (HostEntry& known : hosts) {
      if (known.host != entry.host) continue;
      // OpenMPI adds the slots of repeated lines (a bare repeat counts one slot).
      known.slots = (known.slots > 0 ? known.slots : 1) + (entry.slots > 0 ? entry.slots : 1);
      if (entry.max_slots > 0) known.max_slots = std::max(known.max_slots, entry.max_slots);
      if (known.max_slots > 0 && known.slots > known.max_slots)
        fail("{}: {}: host {} now has slots={} (lines {} and {}), more than its max_slots={}", where(), quoted(full),
             known.host, known.slots, known.line, line_no, known.max_slots);
      merged = true;
    }
    if (!merged) hosts.push_back(std::move(entry));
    if (end == text.size()) break;
  }
  if (hosts.empty()) fail("{}: no hosts (every line is blank or a comment)", source);
  return hosts;
}

std::vector<HostEntry> read_hostfile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read hostfile '{}': {}", path, std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_hostfile(text.str(), path);
}

}  // namespace moe4d
