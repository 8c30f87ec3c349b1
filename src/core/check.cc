#include "core/check.h"

#include <cstdio>
#include <cstdlib>

#include "core/log.h"

namespace moe4d::detail {

void check_failed(const char* file, int line, const char* condition, const std::string& detail) {
  std::string message = fmt::format("[moe4d rank {}] CHECK failed at {}:{}: {}{}{}\n", log_rank(), file, line,
                                    condition, detail.empty() ? "" : " (", detail.empty() ? "" : detail + ")");
  std::fputs(message.c_str(), stderr);
  std::fflush(stderr);
  std::abort();
}

}  // namespace moe4d::detail
