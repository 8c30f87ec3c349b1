// docs/config.md lists exactly the keys the loader accepts (config/config_keys.h): every key of its
// tables is one the table of keys has, and every key the loader reads has a row. The first cell of a
// row is one key or several ("lr, min_lr"), with another spelling in "(alias X)"; a row under
// "## train" is the key train.<cell>. For the enum and bool keys the row's type and default cells
// must also name the spellings and the default the code has.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "config/config_keys.h"

namespace moe4d {
namespace {

std::string trim(const std::string& text) {
  const size_t first = text.find_first_not_of(" `");
  const size_t last = text.find_last_not_of(" `");
  return first == std::string::npos ? "" : text.substr(first, last - first + 1);
}

// The cells of a table row ("\\|" inside a cell is a literal '|').
std::vector<std::string> cells_of(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  for (size_t i = 1; i < line.size(); ++i) {
    if (line[i] == '\\' && i + 1 < line.size() && line[i + 1] == '|') {
      cell += '|';
      ++i;
    } else if (line[i] == '|') {
      cells.push_back(trim(cell));
      cell.clear();
    } else {
      cell += line[i];
    }
  }
  return cells;
}

struct DocRow {
  std::string type;     // the type cell, "" when the table has none
  std::string default_;  // the default cell, "" when the table has none
};

// Every key named by the tables of docs/config.md, as full paths, with its row's cells.
std::map<std::string, DocRow> documented_rows(const std::string& markdown) {
  std::map<std::string, DocRow> keys;
  std::vector<std::string> header;
  std::istringstream in(markdown);
  std::string section;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("## ", 0) == 0) {
      std::istringstream words(line.substr(3));
      words >> section;
      continue;
    }
    if (line.rfind("| key", 0) == 0) header = cells_of(line);
    if (line.rfind("| ", 0) != 0 || line.rfind("| key", 0) == 0) continue;
    const std::vector<std::string> cells = cells_of(line);
    DocRow row;
    for (size_t i = 1; i < header.size() && i < cells.size(); ++i) {
      if (header[i] == "type") row.type = cells[i];
      if (header[i] == "default") row.default_ = cells[i];
    }
    const std::string cell = line.substr(2, line.find('|', 2) - 2);
    std::istringstream names(cell);
    for (std::string name; std::getline(names, name, ',');) {
      name = trim(name);
      if (const size_t alias = name.find("(alias "); alias != std::string::npos) {
        std::string other = name.substr(alias + 7);
        other = other.substr(0, other.find_first_of(":) "));
        keys[section + "." + other] = row;
        name = trim(name.substr(0, alias));
      }
      keys[section + "." + name] = row;
    }
  }
  return keys;
}

std::set<std::string> documented_keys(const std::string& markdown) {
  std::set<std::string> keys;
  for (const auto& [key, row] : documented_rows(markdown)) keys.insert(key);
  return keys;
}

std::string read_doc() {
  std::ifstream file(std::string(MOE4D_SOURCE_DIR) + "/docs/config.md");
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

TEST(ConfigDoc, ListsExactlyTheKeysTheLoaderAccepts) {
  const std::string text = read_doc();
  ASSERT_FALSE(text.empty()) << "cannot read docs/config.md";
  const std::set<std::string> documented = documented_keys(text);
  std::set<std::string> accepted;
  for (const ConfigKey& key : config_keys())
    if (!(key.flags & kKeySection)) accepted.emplace(key.path);
  std::string missing, extra;
  for (const std::string& key : accepted)
    if (!documented.count(key)) missing += " " + key;
  for (const std::string& key : documented)
    if (!accepted.count(key)) extra += " " + key;
  EXPECT_TRUE(missing.empty()) << "docs/config.md has no row for these keys the loader accepts:" << missing;
  EXPECT_TRUE(extra.empty()) << "docs/config.md lists keys the loader does not accept:" << extra;
}

// An enum key's row names its spellings ("gpipe|1f1b|interleaved") and its default; a bool key's row
// its default.
TEST(ConfigDoc, EnumSpellingsAndDefaultsMatchTheCode) {
  const std::map<std::string, DocRow> rows = documented_rows(read_doc());
  int checked = 0;
  for (const ConfigKey& key : config_keys()) {
    const auto row = rows.find(std::string(key.path));
    if (row == rows.end() || !key.field) continue;
    const std::string type = config_key_type(key);
    const bool is_enum = type.find('|') != std::string::npos;
    if (is_enum && !row->second.type.empty()) {
      EXPECT_NE(row->second.type.find(type), std::string::npos)
          << key.path << ": docs/config.md's type '" << row->second.type << "' does not list " << type;
      ++checked;
    }
    if ((is_enum || type == "bool") && !row->second.default_.empty() && !(key.flags & kKeyRequired)) {
      EXPECT_NE(row->second.default_.find(config_key_default(key)), std::string::npos)
          << key.path << ": docs/config.md's default '" << row->second.default_ << "', the code's "
          << config_key_default(key);
      ++checked;
    }
  }
  EXPECT_GE(checked, 15);
}

// The parser above: one row, several keys, an alias.
TEST(ConfigDoc, ReadsRowsWithSeveralKeysAndAliases) {
  const std::set<std::string> keys = documented_keys(
      "## train\n\n| key | type |\n|---|---|\n| lr, min_lr | number |\n## parallel_config (x)\n"
      "| zero_stage (alias enable_parallel_optimizer: true = 1) | 0..3 |\n");
  EXPECT_EQ(keys, (std::set<std::string>{"train.lr", "train.min_lr", "parallel_config.zero_stage",
                                         "parallel_config.enable_parallel_optimizer"}));
}

}  // namespace
}  // namespace moe4d
