// The server's session store (src/server/session_store.h): find by id and fingerprint, a
// different context under the same id is dropped, least-recently-used eviction under the byte
// budget (hot KV + cold tier), contexts larger than the budget are not stored.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "server/session_store.h"
#include "snapkv/snapkv.h"
#include "test_util.h"

namespace snapkv::server {
namespace {

std::shared_ptr<const Engine> stories() {
  EngineOptions o;
  o.n_threads = 1;
  return Engine::load((test::shared_dir() / "models" / "stories260K.gguf").string(), o);
}

/// A prefilled sequence of n tokens (uncompressed, F32): bytes grow with n.
std::shared_ptr<const Sequence> context(const Engine& e, Workspace& ws, size_t n, bool cold = false) {
  SequenceOptions so;
  so.kv_type = KVType::F32;
  if (cold) so.cold_tier = parse_cold_tier("int8");
  std::shared_ptr<Sequence> s = e.new_sequence(so);
  std::vector<int32_t> ids(n, 100);
  ids[0] = 1;
  PrefillOptions po;
  if (cold) po.press = PressSpec::parse("snapkv:budget=8,window=4");
  e.prefill(*s, ids, po, ws);
  return s;
}

TEST(SessionStore, FindPutReplaceAndEvictLeastRecentlyUsed) {
  const auto e = stories();
  Workspace ws(*e);
  const auto a = context(*e, ws, 20), b = context(*e, ws, 20), c = context(*e, ws, 20);
  const size_t one = SessionStore::bytes_of(*a);
  ASSERT_GT(one, 0u);
  SessionStore store(2 * one);  // room for two
  EXPECT_EQ(store.find("a", "fa"), nullptr);
  EXPECT_TRUE(store.put("a", "fa", a));
  EXPECT_TRUE(store.put("b", "fb", b));
  EXPECT_EQ(store.find("a", "fa"), a);   // a is now the most recently used
  EXPECT_TRUE(store.put("c", "fc", c));  // evicts b
  EXPECT_EQ(store.find("b", "fb"), nullptr);
  EXPECT_EQ(store.find("a", "fa"), a);
  EXPECT_EQ(store.find("c", "fc"), c);
  SessionStoreStats st = store.stats();
  EXPECT_EQ(st.entries, 2u);
  EXPECT_EQ(st.bytes, 2 * one);
  EXPECT_EQ(st.evictions, 1u);
  EXPECT_EQ(st.stored, 3u);
  EXPECT_EQ(st.hits, 3u);
  EXPECT_EQ(st.misses, 2u);
  // Another context under the same id: not found, and the old one is dropped.
  EXPECT_EQ(store.find("a", "other"), nullptr);
  EXPECT_EQ(store.find("a", "fa"), nullptr);
  EXPECT_EQ(store.stats().entries, 1u);
  // Replacing keeps one entry per id.
  EXPECT_TRUE(store.put("c", "fc2", a));
  EXPECT_EQ(store.stats().entries, 1u);
  EXPECT_EQ(store.find("c", "fc2"), a);
  // Larger than the whole budget: not stored (and what the id held is gone).
  const auto big = context(*e, ws, 60);
  EXPECT_FALSE(store.put("c", "big", big));
  EXPECT_EQ(store.find("c", "fc2"), nullptr);
  EXPECT_EQ(store.stats().too_large, 1u);
  EXPECT_EQ(store.stats().bytes, 0u);
  // Budget 0: sessions off, nothing is stored.
  SessionStore off(0);
  EXPECT_FALSE(off.put("a", "fa", a));
}

TEST(SessionStore, ColdTierBytesCount) {
  const auto e = stories();
  Workspace ws(*e);
  const auto s = context(*e, ws, 40, /*cold=*/true);
  ASSERT_TRUE(s->stats().compressed);
  ASSERT_GT(s->stats().kv_cold_bytes, 0u);
  EXPECT_EQ(SessionStore::bytes_of(*s), s->stats().kv_cache_bytes + s->stats().kv_cold_bytes);
}

}  // namespace
}  // namespace snapkv::server
