// config/config_text.cc — checks of the raw config text made before yaml-cpp parses it.
#include <sstream>
#include <string>
#include <vector>

#include "config/config_reader.h"

namespace moe4d::config_detail {

// Block depth from indentation (each deeper indentation and each "- " opens a level) plus flow depth
// from brackets outside quotes and comments. Approximate for exotic YAML, exact for a config's.
NestingDepth deepest_nesting(const std::string& text) {
  NestingDepth deepest;
  std::vector<size_t> indents;
  int flow = 0;
  std::istringstream in(text);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    size_t at = line.find_first_not_of(' ');
    if (at == std::string::npos || line[at] == '#') continue;
    int block = 0;
    if (flow == 0) {
      while (!indents.empty() && indents.back() >= at) indents.pop_back();
      indents.push_back(at);
      block = int(indents.size());
      while (at + 1 < line.size() && line[at] == '-' && line[at + 1] == ' ') {  // "- - x": a level each
        ++block;
        at = line.find_first_not_of(' ', at + 1);
        if (at == std::string::npos) break;
      }
    }
    char quote = 0;
    for (size_t i = at == std::string::npos ? line.size() : at; i < line.size(); ++i) {
      const char c = line[i];
      if (quote) {
        if (c == quote) quote = 0;
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '#' && (i == 0 || line[i - 1] == ' ')) {
        break;
      } else if (c == '[' || c == '{') {
        ++flow;
      } else if ((c == ']' || c == '}') && flow > 0) {
        --flow;
      }
      if (block + flow > deepest.depth) deepest = {block + flow, number};
    }
    if (block + flow > deepest.depth) deepest = {block + flow, number};
  }
  return deepest;
}

}  // namespace moe4d::config_detail
