// snapkv core: SHA-256 (sha256.h) on OpenSSL's EVP interface.
#include "core/sha256.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "snapkv/error.h"

namespace snapkv {

struct Sha256::Ctx {
  EVP_MD_CTX* md = nullptr;
  ~Ctx() { EVP_MD_CTX_free(md); }
};

Sha256::Sha256() : ctx_(std::make_unique<Ctx>()) {
  ctx_->md = EVP_MD_CTX_new();
  if (!ctx_->md || EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr) != 1)
    throw Error("sha256: OpenSSL could not start a digest");
}

Sha256::~Sha256() = default;

void Sha256::update(const void* data, size_t n) {
  if (n > 0 && EVP_DigestUpdate(ctx_->md, data, n) != 1) throw Error("sha256: OpenSSL digest update failed");
}

std::array<unsigned char, 32> Sha256::digest() {
  std::array<unsigned char, 32> out{};
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx_->md, out.data(), &len) != 1 || len != out.size())
    throw Error("sha256: OpenSSL digest failed");
  return out;
}

std::string to_hex(const unsigned char* data, size_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    s[2 * i] = kHex[data[i] >> 4];
    s[2 * i + 1] = kHex[data[i] & 15];
  }
  return s;
}

std::string sha256_hex(std::string_view bytes) {
  Sha256 h;
  h.update(bytes.data(), bytes.size());
  const auto d = h.digest();
  return to_hex(d.data(), d.size());
}

std::string sha256_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw Error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  Sha256 h;
  std::vector<unsigned char> buf(size_t{1} << 20);
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) h.update(buf.data(), n);
  const bool bad = std::ferror(f) != 0;
  std::fclose(f);
  if (bad) throw Error(fmt::format("{}: read error", path));
  const auto d = h.digest();
  return to_hex(d.data(), d.size());
}

}  // namespace snapkv
