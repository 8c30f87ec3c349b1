// bench/common/bench_args.h — the benchmarks' `--key=VALUE` flags.
#pragma once

#include <cstring>
#include <string>

namespace moe4d::bench {

// VALUE when `arg` is `key` followed by VALUE (key includes the '='), else nullptr.
inline const char* flag_value(const std::string& arg, const char* key) {
  const size_t n = std::strlen(key);
  return arg.compare(0, n, key) == 0 ? arg.c_str() + n : nullptr;
}

}  // namespace moe4d::bench
