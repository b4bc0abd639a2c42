// The KV cache's row storage (kv/row_buffer.h): contents survive every resize, whether a buffer
// is on the heap or a memory mapping, and crossing between the two.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kv/row_buffer.h"

namespace snapkv {
namespace {

// Byte i of a test pattern.
uint8_t pattern(size_t i) { return static_cast<uint8_t>((i * 131 + 7) >> 3); }

void fill(void* p, size_t n) {
  auto* b = static_cast<uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) b[i] = pattern(i);
}

// The first n bytes of p are the pattern.
bool holds(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i)
    if (b[i] != pattern(i)) return false;
  return true;
}

TEST(RowBuffer, EmptyAndZeroBytes) {
  kvbuf::Buffer b;
  kvbuf::release(b);  // an empty buffer: nothing to free
  kvbuf::resize(b, 0, 0);
  EXPECT_EQ(b.p, nullptr);
  kvbuf::resize(b, kvbuf::kMapBytes, 0);
  ASSERT_NE(b.p, nullptr);
  kvbuf::resize(b, 0, 0);  // frees it
  EXPECT_EQ(b.p, nullptr);
  EXPECT_EQ(b.bytes, 0u);
  EXPECT_FALSE(b.mapped);
}

TEST(RowBuffer, ResizeKeepsTheContentsAcrossHeapAndMappings) {
  const size_t M = kvbuf::kMapBytes;
  // Heap -> heap -> mapping -> larger mapping (mremap) -> the same pages -> much larger -> smaller
  // mapping -> heap -> nothing; each step keeps min(old, new) bytes and then refills the buffer.
  const std::vector<size_t> sizes{1000, M - 1, M, 3 * M + 5, 3 * M + 6, 64 * M + 1, 2 * M + 3, 100, 0};
  kvbuf::Buffer b;
  size_t n = 4096;
  kvbuf::resize(b, n, 0);
  ASSERT_NE(b.p, nullptr);
  fill(b.p, n);
  for (const size_t m : sizes) {
    const size_t keep = std::min(n, m);
    kvbuf::resize(b, m, keep);
    EXPECT_EQ(b.bytes, m);
    if (m == 0) {
      EXPECT_EQ(b.p, nullptr);
      break;
    }
    ASSERT_NE(b.p, nullptr) << m;
    EXPECT_EQ(b.mapped, kvbuf::kMapsLargeBuffers && m >= M) << m;  // far from the mapping cap
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.p) % 64, 0u) << m;
    EXPECT_TRUE(holds(b.p, keep)) << n << " -> " << m << " bytes";
    fill(b.p, m);  // every byte of the new size is writable
    n = m;
  }
  kvbuf::release(b);
}

TEST(RowBuffer, LargeBufferIsWritableToItsLastByte) {
  const size_t n = 5 * kvbuf::kMapBytes + 17;
  const int64_t before = kvbuf::live_mappings();
  kvbuf::Buffer b;
  kvbuf::resize(b, n, 0);
  ASSERT_NE(b.p, nullptr);
  EXPECT_EQ(b.mapped, kvbuf::kMapsLargeBuffers);  // sanitizer builds map nothing
  EXPECT_EQ(kvbuf::live_mappings(), before + (b.mapped ? 1 : 0));
  fill(b.p, n);
  EXPECT_TRUE(holds(b.p, n));
  kvbuf::resize(b, 2 * n, n);  // grown: still one mapping
  EXPECT_TRUE(holds(b.p, n));
  EXPECT_EQ(kvbuf::live_mappings(), before + (b.mapped ? 1 : 0));
  kvbuf::release(b);
  EXPECT_EQ(b.p, nullptr);
  EXPECT_EQ(kvbuf::live_mappings(), before);
}

}  // namespace
}  // namespace snapkv
