// cli/cli_flags.cc — flag spellings, typo suggestions and CLI11's errors in moe4d's words.
#include "cli/cli_flags.h"

#include <algorithm>
#include <regex>

#include <fmt/format.h>

#include "core/error.h"

namespace moe4d {
namespace {

std::string canonical(std::string name) {
  std::replace(name.begin(), name.end(), '_', '-');
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return name;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// "--name" or "--name=value" with a plausible flag name; anything else (a value with spaces, "--")
// is left to CLI11.
bool looks_like_flag(const std::string& arg, std::string* name, std::string* rest) {
  if (arg.size() < 3 || arg.compare(0, 2, "--") != 0 || !std::isalnum(static_cast<unsigned char>(arg[2]))) return false;
  const size_t eq = arg.find('=');
  *name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
  *rest = eq == std::string::npos ? "" : arg.substr(eq);
  return std::all_of(name->begin(), name->end(),
                     [](unsigned char c) { return std::isalnum(c) || c == '-' || c == '_' || c == '.'; });
}

// The long names of `app`'s own options; hidden ones (group "") only when `hidden`.
std::vector<std::string> long_names(const CLI::App& app, bool hidden) {
  std::vector<std::string> names;
  for (const CLI::Option* option : app.get_options()) {
    if (!hidden && option->get_group().empty()) continue;
    for (const std::string& name : option->get_lnames()) names.push_back(name);
  }
  return names;
}

const CLI::App* find_subcommand(const CLI::App& app, const std::string& name) {
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    if (sub->check_name(name)) return sub;
  return nullptr;
}

std::string command_of(const CLI::App* app) {
  std::vector<std::string> names;
  for (; app && app->get_parent(); app = app->get_parent()) names.push_back(app->get_name());
  std::string out = "moe4d";
  for (auto it = names.rbegin(); it != names.rend(); ++it) out += " " + *it;
  return out;
}

std::vector<std::string> subcommand_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    if (!sub->get_group().empty()) names.push_back(sub->get_name());
  return names;
}

// Normalizes args[begin..] as a command line of `root`; returns the innermost command.
const CLI::App* normalize_from(const CLI::App& root, std::vector<std::string>& args, size_t begin) {
  const CLI::App* app = &root;
  for (size_t i = begin; i < args.size(); ++i) {
    std::string& arg = args[i];
    if (arg == "--") {
      // `moe4d launch ... -- train CONFIG ...`: the ranks' own command line.
      if (app->get_name() == "launch" && app->get_parent() == &root && i + 1 < args.size())
        normalize_from(root, args, i + 1);
      break;
    }
    std::string name, rest;
    if (!looks_like_flag(arg, &name, &rest)) {
      if (const CLI::App* sub = find_subcommand(*app, arg)) {
        app = sub;
      } else if (app->get_require_subcommand_min() > 0 && arg.rfind('-', 0) != 0) {
        const std::string suggestion = nearest_name(arg, subcommand_names(*app));
        fail("unknown command '{}'{} ({} --help lists them)", arg,
             suggestion.empty() ? "" : fmt::format("; did you mean {}?", suggestion), command_of(app));
      }
      continue;
    }
    bool found = false;
    for (const CLI::App* scope = app; scope && !found; scope = scope->get_parent()) {
      for (const std::string& known : long_names(*scope, true)) {
        if (canonical(known) != canonical(name)) continue;
        arg = "--" + known + rest;
        found = true;
        break;
      }
    }
    if (found) continue;
    std::string suggestion = nearest_name(name, long_names(*app, false));
    // In the user's spelling: --wroker_num -> --worker_num, --wroker-num -> --worker-num.
    if (name.find('_') != std::string::npos) std::replace(suggestion.begin(), suggestion.end(), '-', '_');
    else if (name.find('-') != std::string::npos) std::replace(suggestion.begin(), suggestion.end(), '_', '-');
    const std::string command = command_of(app);
    if (suggestion.empty())
      fail("unknown flag --{} ({} --help lists them)", name, command);
    fail("unknown flag --{}; did you mean --{}? ({} --help lists them)", name, suggestion, command);
  }
  return app;
}

}  // namespace

std::string nearest_name(const std::string& name, const std::vector<std::string>& candidates) {
  const std::string wanted = canonical(name);
  std::string best;
  size_t best_distance = std::max<size_t>(2, wanted.size() / 3) + 1;
  for (const std::string& candidate : candidates) {
    const std::string c = canonical(candidate);
    size_t distance = edit_distance(wanted, c);
    if (wanted.size() >= 3 && c.compare(0, wanted.size(), wanted) == 0) distance = std::min<size_t>(distance, 1);
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  return best;
}

NormalizedArgs normalize_flags(const CLI::App& root, const std::vector<std::string>& args) {
  NormalizedArgs out{.args = args};
  out.app = normalize_from(root, out.args, 0);
  out.command = command_of(out.app);
  return out;
}

std::string describe_parse_error(const CLI::ParseError& error, const std::string& command, const CLI::App* app) {
  std::string what = error.what();
  while (!what.empty() && (what.back() == '\n' || what.back() == ' ')) what.pop_back();
  std::replace(what.begin(), what.end(), '\n', ' ');
  for (const std::string extras : {"The following arguments were not expected: ", "The following argument was not expected: "})
    if (what.rfind(extras, 0) == 0) what = "unexpected argument(s): " + what.substr(extras.size());
  // CLI::PositiveNumber / NonNegativeNumber print "--tokens: Value abc not in range 0.000000 to
  // 1797693...": say which range, in words.
  static const std::regex kRange(R"(^(--[A-Za-z0-9_-]+): Value (.*) not in range \S+ to [0-9.]{30,}$)");
  std::smatch m;
  if (std::regex_match(what, m, kRange)) {
    std::string expected = "a non-negative number";
    if (app) {
      for (const CLI::Option* option : app->get_options()) {
        if (!option->check_lname(m[1].str().substr(2))) continue;
        auto* editable = const_cast<CLI::Option*>(option);  // CLI11 2.1 reads validators through non-const only
        for (int i = 0;; ++i) {
          try {
            if (editable->get_validator(i)->get_description() == "POSITIVE") expected = "a positive number";
          } catch (const CLI::OptionNotFound&) {
            break;
          }
        }
      }
    }
    what = fmt::format("{}: expected {}, got '{}'", m[1].str(), expected, m[2].str());
  }
  return fmt::format("{}: {} ({} --help)", command, what, command);
}

}  // namespace moe4d
