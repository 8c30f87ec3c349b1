#include "core/sha256.h"

#include <openssl/evp.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/error.h"

namespace moe4d {

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  MOE4D_CHECK(ctx_ != nullptr);
  MOE4D_CHECK(EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr) == 1);
}

Sha256::~Sha256() {
  if (ctx_) EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_));
}

Sha256::Sha256(Sha256&& other) noexcept : ctx_(other.ctx_) { other.ctx_ = nullptr; }

void Sha256::update(const void* data, size_t bytes) {
  MOE4D_CHECK(EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data, bytes) == 1);
}

std::string Sha256::hex_digest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  MOE4D_CHECK(EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), digest, &length) == 1);
  static const char* kHex = "0123456789abcdef";
  std::string out(2 * length, '0');
  for (unsigned int i = 0; i < length; ++i) {
    out[2 * i] = kHex[digest[i] >> 4];
    out[2 * i + 1] = kHex[digest[i] & 15];
  }
  return out;
}

std::string sha256_hex(const void* data, size_t bytes) {
  Sha256 hasher;
  hasher.update(data, bytes);
  return hasher.hex_digest();
}

std::string sha256_file(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (!file) fail("cannot read {}: {}", path, std::strerror(errno));
  Sha256 hasher;
  std::vector<char> block(1 << 20);
  size_t got = 0;
  while ((got = std::fread(block.data(), 1, block.size(), file)) > 0) hasher.update(block.data(), got);
  bool read_error = std::ferror(file);
  std::fclose(file);
  if (read_error) fail("error while reading {}", path);
  return hasher.hex_digest();
}

}  // namespace moe4d
