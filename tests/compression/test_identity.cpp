// Compression must be invisible where it should be:
//  1. with a capacity >= the prompt, every press gives bit-identical logits, greedy tokens and
//     cache bytes to `none` (no entry is evicted, nothing is recomputed);
//  2. for any budget, the prefill's logits (hence the first generated token) are bit-identical
//     with and without compression: each layer is compressed only after its whole prefill, and
//     the next layer's input was computed before. The kept entries are bit-identical to the same
//     positions of the uncompressed cache.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>

#include "compression_util.h"

namespace snapkv {
namespace {

using ctest::options;
using ctest::random_tokens;

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct Outcome {
  std::vector<float> prefill_logits;
  std::vector<float> all_logits;
  std::vector<float> last_logits;  // after the greedy steps
  std::vector<int32_t> greedy;
  size_t bytes = 0, bytes_full = 0;
  size_t n_kept_layers = 0;
};

Outcome run_session(const std::shared_ptr<const Model>& m, const TestSessionOptions& o,
                    const std::vector<int32_t>& prompt, int steps) {
  TestSession s(m, o);
  Outcome r;
  const auto l = s.prefill(prompt, true, &r.all_logits);
  r.prefill_logits.assign(l.begin(), l.end());
  r.n_kept_layers = s.kept().size();
  std::vector<float> cur = r.prefill_logits;
  for (int i = 0; i < steps; ++i) {
    const int32_t t = ctest::argmax(cur);
    r.greedy.push_back(t);
    const auto d = s.decode(t);
    cur.assign(d.begin(), d.end());
  }
  r.last_logits = cur;
  r.bytes = s.stats().kv_cache_bytes;
  r.bytes_full = s.stats().kv_cache_bytes_full;
  return r;
}

// Test 1: capacity >= L (budget == L, budget > L, compression ratio 0) is the identity for every press.
TEST(CompressionIdentity, CapacityAtLeastPromptIsBitIdenticalToNone) {
  const auto m = ctest::stories();
  const int64_t L = 200;
  const auto prompt = random_tokens(L, m->config().n_vocab, 11);
  for (const KVType kv : {KVType::F32, KVType::F16}) {
    const Outcome ref = run_session(m, options("none", 0, kv), prompt, 16);
    ASSERT_EQ(ref.greedy.size(), 16u);
    // Each press with one of the three ways to ask for C >= L (rotating with the press and the
    // KV type, so every press meets two of them): budget == L, budget > L, compression ratio 0.
    const auto& presses = ctest::all_presses();
    for (size_t pi = 1; pi < presses.size(); ++pi) {
      const std::string& name = presses[pi];
      {
        const int mode = static_cast<int>((pi + (kv == KVType::F16 ? 1 : 0)) % 3);
        TestSessionOptions o = options(name, mode == 0 ? L : mode == 1 ? L + 57 : 0, kv);
        if (mode == 2) o.press.compression_ratio = 0.0;  // kvpress convention: remove nothing
        SCOPED_TRACE(name + (kv == KVType::F16 ? " f16" : " f32") + " mode " + std::to_string(mode));
        const Outcome r = run_session(m, o, prompt, 16);
        EXPECT_TRUE(same_bits(r.prefill_logits, ref.prefill_logits));
        EXPECT_TRUE(same_bits(r.all_logits, ref.all_logits));
        EXPECT_EQ(r.greedy, ref.greedy);
        EXPECT_TRUE(same_bits(r.last_logits, ref.last_logits));
        EXPECT_EQ(r.bytes, ref.bytes);
        EXPECT_EQ(r.bytes_full, ref.bytes_full);
        EXPECT_EQ(r.n_kept_layers, 0u) << "no press call may happen when L <= C";
      }
    }
    // Sanity: the reference itself is full: every layer holds L + 16 entries per head.
    const size_t per_entry = size_t{2} * kv_row_bytes(kv, 8) * 4;  // 2 x row bytes (head_dim 8) x 4 KV heads
    EXPECT_EQ(ref.bytes, per_entry * 5 * (L + 16));
  }
}

// Test 2: prefill logits (and the first generated token) do not depend on the budget; the kept
// entries are the uncompressed cache's entries at the same positions, bit for bit.
TEST(CompressionIdentity, PrefillLogitsIndependentOfBudget) {
  const auto m = ctest::stories();
  const int64_t L = 300;
  const auto prompt = random_tokens(L, m->config().n_vocab, 12);
  for (const KVType kv : {KVType::F32, KVType::F16}) {
    TestSession full(m, options("none", 0, kv));
    std::vector<float> full_all;
    const auto fl = full.prefill(prompt, true, &full_all);
    const std::vector<float> full_last(fl.begin(), fl.end());
    const auto full_cache = ctest::snapshot(full.kv_cache());
    const int hd = m->config().head_dim;
    const std::vector<std::string> presses =
        kv == KVType::F32
            ? std::vector<std::string>{"snapkv", "pyramidkv", "adakv", "streamingllm", "h2o", "tova", "knorm", "random"}
            : std::vector<std::string>{"snapkv", "adakv"};
    const std::vector<int64_t> budgets =
        kv == KVType::F32 ? std::vector<int64_t>{40, 150} : std::vector<int64_t>{64, 299};
    for (const std::string& name : presses) {
      for (const int64_t budget : budgets) {
        SCOPED_TRACE(fmt::format("{} budget {} {}", name, budget, kv == KVType::F16 ? "f16" : "f32"));
        TestSession s(m, options(name, budget, kv));
        std::vector<float> all;
        const auto l = s.prefill(prompt, true, &all);
        EXPECT_TRUE(same_bits(l, full_last));
        EXPECT_TRUE(same_bits(all, full_all));
        EXPECT_EQ(ctest::argmax(l), ctest::argmax(full_last));
        ASSERT_EQ(s.kept().size(), 5u) << "every layer of a llama model is compressed";
        // Every kept (position, key, value) is the uncompressed entry at that position.
        const auto snap = ctest::snapshot(s.kv_cache());
        for (size_t il = 0; il < snap.size(); ++il) {
          for (size_t g = 0; g < snap[il].size(); ++g) {
            const auto& hs = snap[il][g];
            const auto& fh = full_cache[il][g];
            if (name != "adakv") {  // adakv may leave one head whole as long as the layer total is H_kv * C
              ASSERT_LT(hs.pos.size(), static_cast<size_t>(L)) << "layer " << il << " head " << g << " not compressed";
            }
            for (size_t j = 0; j < hs.pos.size(); ++j) {
              const auto p = static_cast<size_t>(hs.pos[j]);
              ASSERT_LT(p, static_cast<size_t>(L));
              ASSERT_EQ(fh.pos[p], hs.pos[j]);
              ASSERT_EQ(std::memcmp(hs.k.data() + j * hd, fh.k.data() + p * hd, sizeof(float) * hd), 0)
                  << "layer " << il << " head " << g << " pos " << p;
              ASSERT_EQ(std::memcmp(hs.v.data() + j * hd, fh.v.data() + p * hd, sizeof(float) * hd), 0)
                  << "layer " << il << " head " << g << " pos " << p;
            }
            // And they are what the press reported keeping.
            EXPECT_EQ(hs.pos, s.kept()[il].positions[g]);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace snapkv
