// core/version.h — the version of this build, "moe4d 0.1.0": the one spelling is `project(moe4d
// VERSION ...)` in CMakeLists.txt, compiled into core/version.cc (`moe4d version`, `moe4d --version`
// and the launcher's host probe all print this).
#pragma once

namespace moe4d {

const char* moe4d_version();

}  // namespace moe4d
