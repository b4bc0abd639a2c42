// Shared fixtures of the runtime tests (Engine / Sequence / Batch / generate): engines over the
// shared stories260K model and the cached Gemma 3 270M, prompts, greedy runs of one sequence
// alone, and exact comparisons of two KV caches.
#pragma once

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kv/kv_cache.h"
#include "snapkv/snapkv.h"
#include "test_util.h"

namespace snapkv::rtest {

/// While alive, every file write of this process fails with EFBIG (RLIMIT_FSIZE 0, SIGXFSZ
/// ignored): a full disk without a file system of its own. Restored however the scope ends.
struct NoFileWrites {
  rlimit old{};
  void (*old_handler)(int) = SIG_DFL;
  NoFileWrites() {
    ::getrlimit(RLIMIT_FSIZE, &old);
    old_handler = std::signal(SIGXFSZ, SIG_IGN);
    rlimit r = old;
    r.rlim_cur = 0;
    ::setrlimit(RLIMIT_FSIZE, &r);
  }
  ~NoFileWrites() {
    ::setrlimit(RLIMIT_FSIZE, &old);
    std::signal(SIGXFSZ, old_handler);
  }
  NoFileWrites(const NoFileWrites&) = delete;
  NoFileWrites& operator=(const NoFileWrites&) = delete;
};

/// stories260K (F32 weights: every matmul kernel is row-independent, so batched == alone bit for bit).
inline std::shared_ptr<const Engine> stories(int threads = 2) {
  EngineOptions o;
  o.n_threads = threads;
  return Engine::load((test::shared_dir() / "models" / "stories260K.gguf").string(), o);
}

/// Gemma 3 270M Q4_K_M from the model cache, or nullptr.
inline std::shared_ptr<const Engine> gemma(int threads = 2) {
  static std::shared_ptr<const Engine> e = [threads] {
    EngineOptions o;
    o.n_threads = threads;
    const auto p = test::gemma_path();
    return std::filesystem::exists(p) ? Engine::load(p.string(), o) : std::shared_ptr<const Engine>{};
  }();
  return e;
}

/// `n` ids uniform in [3, n_vocab), BOS (1) first.
inline std::vector<int32_t> prompt(size_t n, int n_vocab, uint64_t seed, int32_t bos = 1) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> d(3, n_vocab - 1);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = d(rng);
  if (bos >= 0) t[0] = bos;
  return t;
}

/// One sequence's greedy continuation: the logits of every step (prefill's last first).
struct Trace {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;
};

/// Prefills `p` with `press` on a fresh sequence and decodes `steps` greedy tokens, alone. Keys
/// (and values unless `kv_v`) stored as `kv`.
inline Trace run_alone(const Engine& e, const std::vector<int32_t>& p, const std::string& press, int steps,
                       KVType kv = KVType::F32, int threads = 0, std::optional<KVType> kv_v = std::nullopt) {
  SequenceOptions so;
  so.kv_type = kv;
  so.kv_type_v = kv_v;
  so.n_ctx = 2048;
  auto seq = e.new_sequence(so);
  WorkspaceOptions wo;
  wo.n_threads = threads;
  Workspace ws(e, wo);
  PrefillOptions po;
  po.press = PressSpec::parse(press);
  auto l = e.prefill(*seq, p, po, ws);
  Trace t;
  t.logits.emplace_back(l.begin(), l.end());
  Batch b;
  for (int i = 0; i < steps; ++i) {
    t.tokens.push_back(argmax(t.logits.back()));
    b.clear();
    b.add(*seq, t.tokens.back());
    e.step(b, ws);
    auto d = b.logits(0);
    t.logits.emplace_back(d.begin(), d.end());
  }
  return t;
}

/// Every (layer, KV head) of two caches holds the same positions and the same K/V bytes.
inline void expect_same_cache(const KVCache& a, const KVCache& b, const std::string& what) {
  ASSERT_EQ(a.n_layer(), b.n_layer()) << what;
  for (int il = 0; il < a.n_layer(); ++il)
    for (size_t h = 0; h < a.layer(il).heads.size(); ++h) {
      const KVHeadCache& x = a.layer(il).heads[h];
      const KVHeadCache& y = b.layer(il).heads[h];
      ASSERT_EQ(x.size(), y.size()) << what << " layer " << il << " head " << h;
      ASSERT_EQ(x.k_type(), y.k_type()) << what;
      ASSERT_EQ(x.v_type(), y.v_type()) << what;
      const auto n = static_cast<size_t>(x.size());
      EXPECT_TRUE(std::equal(x.positions().begin(), x.positions().end(), y.positions().begin()))
          << what << " layer " << il << " head " << h;
      EXPECT_EQ(0, std::memcmp(x.k_data(), y.k_data(), n * x.k_row_bytes()))
          << what << " K, layer " << il << " head " << h;
      EXPECT_EQ(0, std::memcmp(x.v_data(), y.v_data(), n * x.v_row_bytes()))
          << what << " V, layer " << il << " head " << h;
    }
}

/// A sequence of a batch test: prompt length and press.
struct SeqCase {
  size_t len;
  std::string press;
};

/// Runs every case alone (prompt(len, n_vocab, seed + i), `steps` greedy tokens, cache type `kv`,
/// values `kv_v` when set),
/// then all of them prefilled one by one and stepped together in one Batch, and expects the same
/// logits bit for bit at every step and the same n_past at the end.
inline void expect_batched_equals_alone(const Engine& e, const std::vector<SeqCase>& cases, int steps, KVType kv,
                                        uint64_t seed, std::optional<KVType> kv_v = std::nullopt) {
  const int V = e.info().n_vocab;
  std::vector<Trace> alone;
  for (size_t i = 0; i < cases.size(); ++i)
    alone.push_back(run_alone(e, prompt(cases[i].len, V, seed + i), cases[i].press, steps, kv, 0, kv_v));
  Workspace ws(e);
  std::vector<std::unique_ptr<Sequence>> seqs;
  std::vector<int32_t> next;
  for (size_t i = 0; i < cases.size(); ++i) {
    SequenceOptions so;
    so.kv_type = kv;
    so.kv_type_v = kv_v;
    so.n_ctx = 2048;
    seqs.push_back(e.new_sequence(so));
    PrefillOptions po;
    po.press = PressSpec::parse(cases[i].press);
    const auto l = e.prefill(*seqs.back(), prompt(cases[i].len, V, seed + i), po, ws);
    ASSERT_TRUE(std::equal(l.begin(), l.end(), alone[i].logits[0].begin())) << kv_type_name(kv) << " seq " << i;
    next.push_back(argmax(l));
  }
  Batch b;
  for (int s = 0; s < steps; ++s) {
    b.clear();
    for (size_t i = 0; i < seqs.size(); ++i) b.add(*seqs[i], next[i]);
    e.step(b, ws);
    for (size_t i = 0; i < seqs.size(); ++i) {
      ASSERT_EQ(next[i], alone[i].tokens[static_cast<size_t>(s)]) << kv_type_name(kv) << " seq " << i << " step " << s;
      const auto l = b.logits(static_cast<int>(i));
      EXPECT_TRUE(std::equal(l.begin(), l.end(), alone[i].logits[static_cast<size_t>(s) + 1].begin()))
          << kv_type_name(kv) << " seq " << i << " step " << s;
      next[i] = argmax(l);
    }
  }
  for (size_t i = 0; i < seqs.size(); ++i) EXPECT_EQ(seqs[i]->n_past(), static_cast<int64_t>(cases[i].len) + steps);
}

}  // namespace snapkv::rtest
