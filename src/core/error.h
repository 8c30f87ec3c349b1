// core/error.h — the recoverable error type of moe4d.
//
// Two kinds of failure exist (docs/style.md): bad input from a user (config, data file, checkpoint,
// hostfile, CLI flag) and broken invariants. The first kind is thrown as `moe4d::Error`, carries one
// line naming what was wrong and what was expected, and is caught by the CLI, which prints it and
// exits non-zero. Broken invariants use MOE4D_CHECK (core/check.h) and abort.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace moe4d {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Throws moe4d::Error with an fmt-formatted message.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace moe4d
