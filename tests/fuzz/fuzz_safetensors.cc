// Fuzzes the safetensors reader (checkpoint/safetensors.h) on whole files: the input is written to a
// temporary file and opened. Contract: moe4d::Error, or tensors whose every byte lies inside the
// mapping (each one is read in full, so AddressSanitizer sees any view past the end).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "checkpoint/safetensors.h"
#include "core/error.h"

namespace {

const std::string& scratch_path() {
  static const std::string path = "/tmp/moe4d-fuzz-" + std::to_string(::getpid()) + ".safetensors";
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::FILE* file = std::fopen(scratch_path().c_str(), "wb");
  if (!file) return 0;
  std::fwrite(data, 1, size, file);
  std::fclose(file);
  try {
    const moe4d::SafetensorsFile st = moe4d::SafetensorsFile::open(scratch_path());
    volatile unsigned sum = 0;
    for (const auto& [name, tensor] : st.tensors()) {
      const auto* bytes = static_cast<const unsigned char*>(tensor.data);
      for (size_t i = 0; i < tensor.nbytes(); ++i) sum = sum + bytes[i];
    }
    for (const auto& [key, value] : st.metadata()) sum = sum + static_cast<unsigned>(key.size() + value.size());
  } catch (const moe4d::Error&) {
  }
  return 0;
}
