// core/check.h — invariant checks that abort with file:line, rank and the offending values.
//
// Use MOE4D_CHECK for conditions that can only fail through a bug in moe4d. Bad user input must
// instead throw moe4d::Error (core/error.h) so the CLI can print one clear line.
#pragma once

#include <fmt/format.h>

#include <string>

namespace moe4d::detail {
[[noreturn]] void check_failed(const char* file, int line, const char* condition, const std::string& detail);
}  // namespace moe4d::detail

#define MOE4D_CHECK(cond)                                                        \
  do {                                                                           \
    if (!(cond)) ::moe4d::detail::check_failed(__FILE__, __LINE__, #cond, ""); \
  } while (0)

#define MOE4D_CHECK_MSG(cond, ...)                                                                   \
  do {                                                                                               \
    if (!(cond)) ::moe4d::detail::check_failed(__FILE__, __LINE__, #cond, fmt::format(__VA_ARGS__)); \
  } while (0)

#define MOE4D_CHECK_OP(a, op, b)                                                                             \
  do {                                                                                                       \
    const auto& moe4d_a_ = (a);                                                                              \
    const auto& moe4d_b_ = (b);                                                                              \
    if (!(moe4d_a_ op moe4d_b_))                                                                             \
      ::moe4d::detail::check_failed(__FILE__, __LINE__, #a " " #op " " #b,                                   \
                                    fmt::format("{} vs {}", moe4d_a_, moe4d_b_));                            \
  } while (0)

#define MOE4D_CHECK_EQ(a, b) MOE4D_CHECK_OP(a, ==, b)
#define MOE4D_CHECK_NE(a, b) MOE4D_CHECK_OP(a, !=, b)
#define MOE4D_CHECK_LT(a, b) MOE4D_CHECK_OP(a, <, b)
#define MOE4D_CHECK_LE(a, b) MOE4D_CHECK_OP(a, <=, b)
#define MOE4D_CHECK_GE(a, b) MOE4D_CHECK_OP(a, >=, b)
#define MOE4D_CHECK_GT(a, b) MOE4D_CHECK_OP(a, >, b)
