// SHA-256 (src/core/sha256.h) against the FIPS 180-4 example vectors.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "core/sha256.h"
#include "snapkv/error.h"

namespace snapkv {
namespace {

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalEqualsOneShotAndFiles) {
  Sha256 h;
  h.update("ab", 2);
  h.update("c", 1);
  const auto d = h.digest();
  EXPECT_EQ(to_hex(d.data(), d.size()), sha256_hex("abc"));
  const auto path = std::filesystem::temp_directory_path() / "snapkv_sha256_test.bin";
  const std::string body(3u << 20, 'x');  // three 1 MiB blocks
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fwrite(body.data(), 1, body.size(), f), body.size());
  std::fclose(f);
  EXPECT_EQ(sha256_file(path.string()), sha256_hex(body));
  std::filesystem::remove(path);
  EXPECT_THROW(sha256_file("/nonexistent/snapkv.gguf"), Error);
}

}  // namespace
}  // namespace snapkv
