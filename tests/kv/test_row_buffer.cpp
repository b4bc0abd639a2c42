// The KV cache's row storage (kv/row_buffer.h): contents survive every resize, whether a buffer
// is on the heap or a memory mapping, and crossing between the two.
#include <gtest/gtest.h>

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

TEST(RowBuffer, ZeroBytesIsNull) {
  EXPECT_EQ(kvbuf::allocate(0), nullptr);
  kvbuf::release(nullptr, 0);
  kvbuf::release(nullptr, kvbuf::kMapBytes);
  EXPECT_EQ(kvbuf::resize(nullptr, 0, 0, 0), nullptr);
}

TEST(RowBuffer, ResizeKeepsTheContentsAcrossHeapAndMappings) {
  const size_t M = kvbuf::kMapBytes;
  // Heap -> heap -> mapping -> larger mapping (mremap) -> same pages -> smaller mapping -> heap
  // -> nothing; each step keeps min(old, new) bytes and then refills the whole buffer.
  const std::vector<size_t> sizes{1000, M - 1, M, 3 * M + 5, 3 * M + 6, 64 * M + 1, 2 * M + 3, 100, 0};
  size_t n = 4096;
  void* p = kvbuf::allocate(n);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  fill(p, n);
  for (const size_t m : sizes) {
    const size_t keep = std::min(n, m);
    p = kvbuf::resize(p, n, m, keep);
    if (m == 0) {
      EXPECT_EQ(p, nullptr);
      break;
    }
    ASSERT_NE(p, nullptr) << m;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << m;
    EXPECT_TRUE(holds(p, keep)) << n << " -> " << m << " bytes";
    fill(p, m);  // every byte of the new size is writable
    n = m;
  }
}

TEST(RowBuffer, LargeAllocationIsWritableToItsLastByte) {
  const size_t n = 5 * kvbuf::kMapBytes + 17;
  void* p = kvbuf::allocate(n);
  ASSERT_NE(p, nullptr);
  fill(p, n);
  EXPECT_TRUE(holds(p, n));
  kvbuf::release(p, n);
}

}  // namespace
}  // namespace snapkv
