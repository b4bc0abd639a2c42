// snapkv core: SHA-256 (FIPS 180-4) through OpenSSL's libcrypto — the model fingerprint of saved
// sessions and of evaluation runs, and the checksum of session files.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace snapkv {

/// An incremental SHA-256: update() any number of times, then digest() once.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, size_t n);
  /// The 32-byte digest; the object cannot be updated afterwards.
  std::array<unsigned char, 32> digest();

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

/// Lower-case hex of bytes.
std::string to_hex(const unsigned char* data, size_t n);
/// Lower-case hex SHA-256 of `bytes`.
std::string sha256_hex(std::string_view bytes);
/// Lower-case hex SHA-256 of the file at `path`, read in 1 MiB blocks. Throws snapkv::Error
/// naming the file when it cannot be read.
std::string sha256_file(const std::string& path);

}  // namespace snapkv
