// core/error.h — the recoverable error type of moe4d.
//
// Two kinds of failure exist (docs/style.md): bad input from a user (config, data file, checkpoint,
// hostfile, a flag's value) and broken invariants. The first kind is thrown as `moe4d::Error` and
// carries one line naming what was wrong and what was expected. The CLI prints it as
// `moe4d: error: <line>` and exits with status 2 (cli/main.cc); a flag CLI11 itself rejects is
// CLI11's error, not this one. Under mpirun (train, eval, bench) a set-up error, the same on every
// rank, is printed by rank 0 and every rank exits 2; a later one may be one rank's alone: that rank
// prints `moe4d: error (rank R): <line>` and ends the whole job with status 2 (MpiRuntime::abort_job).
// Broken invariants use MOE4D_CHECK (core/check.h): file:line, rank and values, then abort().
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
