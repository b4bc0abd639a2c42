// Decoding allocates no heap memory per token (buffers are preallocated in the Session; the KV
// cache grows in blocks of KVHeadCache::kGrowEntries). Counted through the global operator new.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "golden_util.h"
#include "model/model.h"
#include "support/test_session.h"

// AddressSanitizer owns operator new/delete: the counting replacement (and so this test) is
// compiled only in builds without it.
#if !defined(__SANITIZE_ADDRESS__)
#define SNAPKV_COUNT_ALLOCS 1
namespace {
std::atomic<bool> g_counting{false};
std::atomic<long> g_allocs{0};
}  // namespace

void* operator new(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocs.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new(std::size_t n, std::align_val_t a) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocs.fetch_add(1, std::memory_order_relaxed);
  const auto al = static_cast<std::size_t>(a);
  if (void* p = std::aligned_alloc(al, (n + al - 1) / al * al)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
#endif

namespace snapkv {
namespace {

TEST(Decode, AllocatesNothingPerToken) {
#if !defined(SNAPKV_COUNT_ALLOCS)
  GTEST_SKIP() << "allocation counting is disabled under AddressSanitizer";
#else
  auto model = Model::load((test::shared_dir() / "models" / "stories260K.gguf").string());
  for (const KVType t : {KVType::F32, KVType::F16}) {
    TestSessionOptions o;
    o.kv_type = t;
    TestSession s(model, o);
    std::vector<int32_t> prompt(100, 300);
    prompt[0] = 1;
    s.prefill(prompt);
    s.decode(301);  // first decode step: the cache grows by one block (kGrowEntries)
    g_allocs = 0;
    g_counting = true;
    for (int i = 0; i < 100; ++i) s.decode(302 + i);  // stays within the block
    g_counting = false;
    EXPECT_EQ(g_allocs.load(), 0) << "heap allocations during 100 decode steps";
  }
#endif
}

}  // namespace
}  // namespace snapkv
