// snapkv eval: SHA-256 (FIPS 180-4) of bytes and of files, for the run's provenance record.
#pragma once

#include <string>
#include <string_view>

namespace snapkv::eval {

/// Lower-case hex SHA-256 of `bytes`.
std::string sha256_hex(std::string_view bytes);
/// Lower-case hex SHA-256 of the file at `path`, read in 1 MiB blocks. Throws snapkv::Error
/// naming the file when it cannot be read.
std::string sha256_file(const std::string& path);

}  // namespace snapkv::eval
