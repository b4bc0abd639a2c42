// The known pitfalls of reference SnapKV / kvpress implementations must be impossible here
// (test 5; 5a and 5g are in test_memory.cpp, 5f in test_positions.cpp):
//  (b) compression is not skipped on a second request (reset(), or a new TestSession on the same Model);
//  (c) the observation window is not evicted when scores tie;
//  (d) compression never silently does nothing: with L > C each compressed layer holds exactly C
//      entries per KV head (adakv: H_kv x C per layer; pyramidkv: n_layer x H_kv x C in total);
//  (e) a budget smaller than the window (+ sinks) is an error naming --budget.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "compression_util.h"
#include "snapkv/error.h"

namespace snapkv {
namespace {

using ctest::options;
using ctest::random_tokens;

std::vector<std::vector<std::vector<int32_t>>> kept_positions(const TestSession& s) {
  std::vector<std::vector<std::vector<int32_t>>> out;
  for (const auto& k : s.kept()) out.push_back(k.positions);
  return out;
}

// (b) A second request compresses again, with the same kept sets for the same input.
TEST(CompressionPitfalls, SecondRequestCompressesAgain) {
  const auto m = ctest::stories();
  const int64_t L = 260, C = 40;
  const auto prompt = random_tokens(L, m->config().n_vocab, 61);
  const auto other = random_tokens(L + 20, m->config().n_vocab, 62);
  for (const std::string name : {"snapkv", "adakv", "h2o"}) {
    SCOPED_TRACE(name);
    const TestSessionOptions o = options(name, C, KVType::F16, 16);
    TestSession s(m, o);
    const auto l1 = s.prefill(prompt);
    const std::vector<float> logits1(l1.begin(), l1.end());
    const auto kept1 = kept_positions(s);
    const auto snap1 = ctest::snapshot(s.kv_cache());
    const size_t bytes1 = s.stats().kv_cache_bytes;
    ASSERT_EQ(kept1.size(), 5u);
    s.decode(3);
    s.decode(4);

    // reset() then the same prompt: the same compressed cache, not an uncompressed one.
    s.reset();
    EXPECT_EQ(s.n_past(), 0);
    EXPECT_TRUE(s.kept().empty());
    EXPECT_EQ(s.kv_cache().bytes(), 0u);
    const auto l2 = s.prefill(prompt);
    EXPECT_TRUE(std::equal(l2.begin(), l2.end(), logits1.begin(), logits1.end()));
    EXPECT_EQ(kept_positions(s), kept1);
    EXPECT_EQ(s.stats().kv_cache_bytes, bytes1);
    const auto snap2 = ctest::snapshot(s.kv_cache());
    for (size_t il = 0; il < snap1.size(); ++il)
      for (size_t g = 0; g < snap1[il].size(); ++g) {
        EXPECT_EQ(snap2[il][g].pos, snap1[il][g].pos);
        EXPECT_EQ(snap2[il][g].k, snap1[il][g].k);
        EXPECT_EQ(snap2[il][g].v, snap1[il][g].v);
      }

    // reset() then another, longer prompt: compressed to C again.
    s.reset();
    s.prefill(other);
    EXPECT_EQ(s.kept().size(), 5u);
    EXPECT_EQ(s.stats().kv_cache_bytes, bytes1);

    // A new TestSession on the same Model.
    TestSession s2(m, o);
    s2.prefill(prompt);
    EXPECT_EQ(kept_positions(s2), kept1);
    EXPECT_EQ(s2.stats().kv_cache_bytes, bytes1);
  }
}

// (c) Ties: exact ties (the all-zero model: every query, key and score is 0) and near ties (a
// prompt of one repeated token id on the real and synthetic models); every press still keeps the
// last W positions in every head of every compressed layer.
TEST(CompressionPitfalls, WindowSurvivesTiedScores) {
  {
    // The all-zero model really produces all-zero keys (so the scores tie exactly).
    TestSession z(ctest::zero_synthetic(), options("none", 0, KVType::F32));
    z.prefill(random_tokens(10, 512, 66));
    for (const auto& h : z.kv_cache().layer(1).heads) {
      std::vector<float> k(16);
      for (int64_t i = 0; i < h.size(); ++i) {
        h.key_row(i, k.data());
        for (const float x : k) ASSERT_EQ(x, 0.0f);
      }
    }
  }
  for (const int which : {0, 1, 2}) {
    const auto m = which == 0 ? ctest::zero_synthetic() : which == 1 ? ctest::stories() : ctest::synthetic();
    const bool synth = which != 1;
    const int64_t L = 200, C = 48;
    const int W = 24;
    const std::vector<int32_t> prompt(static_cast<size_t>(L), 300);
    for (const auto& name : ctest::all_presses()) {
      if (name == "none") continue;
      SCOPED_TRACE(name + (which == 0 ? " zero" : synth ? " synthetic" : " stories"));
      TestSession s(m, options(name, C, KVType::F32, W));
      s.prefill(prompt);
      ASSERT_EQ(static_cast<int>(s.kept().size()), m->config().n_layer);
      for (int il = 0; il < m->config().n_layer; ++il) {
        for (const auto& h : s.kv_cache().layer(il).heads) {
          const auto pos = h.positions();
          ASSERT_GE(pos.size(), static_cast<size_t>(W));
          for (int j = 0; j < W; ++j)
            EXPECT_EQ(pos[pos.size() - static_cast<size_t>(W) + static_cast<size_t>(j)], L - W + j)
                << "layer " << il << ": window position " << L - W + j << " evicted";
        }
      }
    }
  }
}

// (d) With L > C, a press always compresses, to exactly the documented sizes; a compression
// ratio gives C = L - floor(L * ratio).
TEST(CompressionPitfalls, CompressionNeverSilentlyDoesNothing) {
  struct Case {
    bool synth;
    int64_t L, C;
    double ratio;  // < 0: use budget C
  };
  for (const Case c : {Case{false, 300, 48, -1}, Case{false, 301, 0, 0.5}, Case{true, 900, 100, -1}}) {
    const auto m = c.synth ? ctest::synthetic() : ctest::stories();
    const ModelConfig& cfg = m->config();
    const auto prompt = random_tokens(static_cast<size_t>(c.L), cfg.n_vocab, 63);
    const int64_t C = c.ratio < 0 ? c.C : c.L - static_cast<int64_t>(std::floor(c.L * c.ratio));
    for (const auto& name : ctest::all_presses()) {
      if (name == "none") continue;
      SCOPED_TRACE(fmt::format("{} L {} C {} {}", name, c.L, C, c.synth ? "synthetic" : "stories"));
      TestSessionOptions o = options(name, c.ratio < 0 ? C : 0, KVType::F32, 16, 1024);
      if (c.ratio >= 0) o.press.compression_ratio = c.ratio;
      TestSession s(m, o);
      s.prefill(prompt);
      ASSERT_EQ(static_cast<int>(s.kept().size()), cfg.n_layer);
      int64_t grand = 0;
      for (int il = 0; il < cfg.n_layer; ++il) {
        int64_t total = 0;
        for (const auto& h : s.kv_cache().layer(il).heads) {
          total += h.size();
          EXPECT_GE(h.size(), 16) << "layer " << il << ": fewer entries than the window";
          if (name != "adakv" && name != "pyramidkv") {
            EXPECT_EQ(h.size(), C) << "layer " << il;
          }
        }
        if (name != "pyramidkv") {
          EXPECT_EQ(total, cfg.n_head_kv * C) << "layer " << il;
        }
        grand += total;
      }
      EXPECT_EQ(grand, int64_t{cfg.n_layer} * cfg.n_head_kv * C);
      EXPECT_LT(s.stats().kv_cache_bytes, s.stats().kv_cache_bytes_full);
    }
  }
}

// (e) A budget below the window (or window + sinks) is rejected up front, naming --budget; a
// ratio that leaves fewer than the window is rejected at prefill, naming --compression-ratio,
// leaving the session empty and usable.
TEST(CompressionPitfalls, BudgetBelowWindowIsAnError) {
  const auto m = ctest::stories();
  auto expect_error = [](auto&& f, const std::string& needle) {
    try {
      f();
      ADD_FAILURE() << "no snapkv::Error thrown (expected one naming " << needle << ")";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  for (const auto& name : ctest::all_presses()) {
    if (name == "none") continue;
    SCOPED_TRACE(name);
    expect_error([&] { TestSession s(m, options(name, 31, KVType::F16, 32)); }, "--budget");
    expect_error([&] { TestSession s(m, options(name, 1, KVType::F16, 32)); }, "--budget");
  }
  // streamingllm: the sinks come on top of the window.
  TestSessionOptions o = options("streamingllm", 34, KVType::F16, 32);
  o.press.sinks = 4;
  expect_error([&] { TestSession s(m, o); }, "--budget");
  o.press.budget = 36;
  EXPECT_NO_THROW({ TestSession s(m, o); });

  // Ratio: 64 tokens, ratio 0.9 -> C = 7 < W = 32.
  TestSessionOptions r = options("snapkv", 0, KVType::F16, 32);
  r.press.compression_ratio = 0.9;
  TestSession s(m, r);
  const auto prompt = random_tokens(64, m->config().n_vocab, 64);
  expect_error([&] { s.prefill(prompt); }, "--compression-ratio");
  EXPECT_EQ(s.n_past(), 0);
  EXPECT_EQ(s.kv_cache().bytes(), 0u);
  // The same session still works for a prompt the ratio can compress (C = 400 - 360 = 40 >= 32).
  const auto longer = random_tokens(400, m->config().n_vocab, 65);
  s.prefill(longer);
  EXPECT_EQ(s.kv_cache().layer(0).heads[0].size(), 40);
}

}  // namespace
}  // namespace snapkv
