// Decoding allocates no heap memory per token (buffers are preallocated in the Session; the KV
// cache grows in blocks of KVHeadCache::kGrowEntries). Counted through the global operator new.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "golden_util.h"
#include "model/model.h"
#include "snapkv/snapkv.h"
#include "support/synthetic_model.h"
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

// A batched step: sequences with 1, 2 and 3 decode rows (a run of rows of one sequence is a
// span attended as a causal block), rows with and without logits, a compressed cache, F16 and
// F32. The caches grow in blocks whatever the number of rows a sequence gets per step.
TEST(Decode, BatchedStepAllocatesNothingPerStep) {
#if !defined(SNAPKV_COUNT_ALLOCS)
  GTEST_SKIP() << "allocation counting is disabled under AddressSanitizer";
#else
  EngineOptions eo;
  eo.n_threads = 2;
  auto e = Engine::load((test::shared_dir() / "models" / "stories260K.gguf").string(), eo);
  Workspace ws(*e);
  struct Seq {
    size_t len;
    const char* press;
    KVType kv;
    int rows;
    std::unique_ptr<Sequence> s;
  };
  std::vector<Seq> seqs;
  seqs.push_back({50, "none", KVType::F16, 1, nullptr});
  seqs.push_back({300, "snapkv:budget=64,window=16", KVType::F16, 2, nullptr});
  seqs.push_back({20, "none", KVType::F16, 1, nullptr});
  seqs.push_back({10, "none", KVType::F32, 3, nullptr});
  for (Seq& q : seqs) {
    SequenceOptions so;
    so.kv_type = q.kv;
    q.s = e->new_sequence(so);
    std::vector<int32_t> p(q.len, 300);
    p[0] = 1;
    PrefillOptions po;
    po.press = PressSpec::parse(q.press);
    e->prefill(*q.s, p, po, ws);
  }
  Batch b;
  auto step = [&](int i) {
    b.clear();
    for (size_t k = 0; k < seqs.size(); ++k)
      for (int r = 0; r < seqs[k].rows; ++r) b.add(*seqs[k].s, 302 + (i + r) % 100, k != 2 && r == seqs[k].rows - 1);
    e->step(b, ws);
  };
  for (int i = 0; i < 3; ++i) step(i);  // the first steps grow the caches by a block
  g_allocs = 0;
  g_counting = true;
  for (int i = 3; i < 33; ++i) step(i);  // 30 steps: at most 90 more entries, inside the block
  g_counting = false;
  EXPECT_EQ(g_allocs.load(), 0) << "heap allocations during 30 batched steps";
  EXPECT_EQ(seqs[3].s->n_past(), 10 + 33 * 3);
#endif
}

// A Q8_0 cache (a small synthetic model: stories260K's head_dim 8 cannot be Q8_0) on 2 threads,
// long enough for the decode kernel's parallel path. AVX-512 builds dequantize in registers; other
// builds use dequantization tiles that live in the workspace, allocated by the first step.
TEST(Decode, Q8_0CacheAllocatesNothingPerToken) {
#if !defined(SNAPKV_COUNT_ALLOCS)
  GTEST_SKIP() << "allocation counting is disabled under AddressSanitizer";
#else
  auto e = load_synthetic_engine(small_q8_kv_config(), 2);
  Workspace ws(*e);
  SequenceOptions so;
  so.kv_type = KVType::Q8_0;
  auto s = e->new_sequence(so);
  std::vector<int32_t> p(2300, 300);
  p[0] = 1;
  e->prefill(*s, p, PrefillOptions{}, ws);
  Batch b;
  auto step = [&](int i) {
    b.clear();
    b.add(*s, 302 + i % 100);
    e->step(b, ws);
  };
  step(0);  // the first step grows the cache by a block and allocates the tiles
  g_allocs = 0;
  g_counting = true;
  for (int i = 1; i < 60; ++i) step(i);
  g_counting = false;
  EXPECT_EQ(g_allocs.load(), 0) << "heap allocations during 59 decode steps over a q8_0 cache";
#endif
}

}  // namespace
}  // namespace snapkv
