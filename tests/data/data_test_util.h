// tests/data/data_test_util.h — helpers shared by the data tests: a self-removing temporary
// directory, small file helpers and a check that an error is one line containing given parts.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <sstream>
#include <string>

#include "../common/temp_dir.h"
#include "core/error.h"

namespace moe4d::test {


inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  ASSERT_TRUE(out.good()) << path;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs `body`, which must throw moe4d::Error whose message is one line containing every part.
inline void expect_error(const std::function<void()>& body, std::initializer_list<std::string> parts) {
  try {
    body();
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << "message spans lines: " << message;
    for (const std::string& part : parts)
      EXPECT_NE(message.find(part), std::string::npos) << "missing \"" << part << "\" in: " << message;
    return;
  }
  ADD_FAILURE() << "expected moe4d::Error";
}

}  // namespace moe4d::test
