// core/version.cc — MOE4D_VERSION comes from CMakeLists.txt's project(VERSION) (src/CMakeLists.txt).
#include "core/version.h"

#ifndef MOE4D_VERSION
#error "MOE4D_VERSION is set by src/CMakeLists.txt from the project version"
#endif

namespace moe4d {

const char* moe4d_version() { return "moe4d " MOE4D_VERSION; }

}  // namespace moe4d
