// docs/config.md lists exactly the keys the loader accepts (config/config_keys.h): every key of its
// tables is one the table of keys has, and every key the loader reads has a row. The first cell of a
// row is one key or several ("lr, min_lr"), with another spelling in "(alias X)"; a row under
// "## train" is the key train.<cell>.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "config/config_keys.h"

namespace moe4d {
namespace {

std::string trim(const std::string& text) {
  const size_t first = text.find_first_not_of(" `");
  const size_t last = text.find_last_not_of(" `");
  return first == std::string::npos ? "" : text.substr(first, last - first + 1);
}

// Every key named by the tables of docs/config.md, as full paths.
std::set<std::string> documented_keys(const std::string& markdown) {
  std::set<std::string> keys;
  std::istringstream in(markdown);
  std::string section;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("## ", 0) == 0) {
      std::istringstream words(line.substr(3));
      words >> section;
      continue;
    }
    if (line.rfind("| ", 0) != 0 || line.rfind("| key", 0) == 0) continue;
    const std::string cell = line.substr(2, line.find('|', 2) - 2);
    std::istringstream names(cell);
    for (std::string name; std::getline(names, name, ',');) {
      name = trim(name);
      if (const size_t alias = name.find("(alias "); alias != std::string::npos) {
        std::string other = name.substr(alias + 7);
        other = other.substr(0, other.find_first_of(":) "));
        keys.insert(section + "." + other);
        name = trim(name.substr(0, alias));
      }
      keys.insert(section + "." + name);
    }
  }
  return keys;
}

TEST(ConfigDoc, ListsExactlyTheKeysTheLoaderAccepts) {
  std::ifstream file(std::string(MOE4D_SOURCE_DIR) + "/docs/config.md");
  ASSERT_TRUE(file) << "cannot read docs/config.md";
  std::stringstream text;
  text << file.rdbuf();
  const std::set<std::string> documented = documented_keys(text.str());
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
