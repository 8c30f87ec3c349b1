// core/sha256.h — SHA-256 digests (OpenSSL) of memory and files, as lowercase hex.
#pragma once

#include <cstddef>
#include <string>

namespace moe4d {

// Incremental hasher. Move-only.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&& other) noexcept;
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, size_t bytes);
  std::string hex_digest();  // finishes the hash

 private:
  void* ctx_;  // EVP_MD_CTX*
};

std::string sha256_hex(const void* data, size_t bytes);
// Throws moe4d::Error naming the file if it cannot be read.
std::string sha256_file(const std::string& path);

}  // namespace moe4d
