// The press sees the same inputs whatever the prefill chunk: the observation-window queries and
// (H2O) all queries are gathered across chunk boundaries, including chunks shorter than the
// window and chunks that split it. Kept positions must equal those of a one-chunk prefill.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>

#include "compression_util.h"

namespace snapkv {
namespace {

TEST(CompressionChunking, KeptSetsIndependentOfPrefillChunk) {
  const auto m = ctest::stories();
  const int64_t L = 300, C = 48;
  const int W = 16;
  const auto prompt = ctest::random_tokens(L, m->config().n_vocab, 91);
  for (const std::string name : {"snapkv", "h2o", "tova", "adakv"}) {
    TestSessionOptions o = ctest::options(name, C, KVType::F32, W);
    o.prefill_chunk = 512;
    TestSession one(m, o);
    one.prefill(prompt);
    ASSERT_EQ(one.kept().size(), 5u);
    // 7: many chunks, the window split across three of them; 290: the window split 10 + 6.
    for (const int chunk : {7, 290}) {
      SCOPED_TRACE(fmt::format("{} chunk {}", name, chunk));
      o.prefill_chunk = chunk;
      TestSession s(m, o);
      s.prefill(prompt);
      ASSERT_EQ(s.kept().size(), one.kept().size());
      for (size_t i = 0; i < s.kept().size(); ++i) {
        EXPECT_EQ(s.kept()[i].positions, one.kept()[i].positions) << "layer " << s.kept()[i].layer;
        // Scores agree to rounding (the chunked attention sums in another order).
        const auto& a = s.kept()[i].scores;
        const auto& b = one.kept()[i].scores;
        ASSERT_EQ(a.size(), b.size());
        for (size_t g = 0; g < a.size(); ++g) {
          ASSERT_EQ(a[g].size(), b[g].size());
          for (size_t j = 0; j < a[g].size(); ++j) {
            if (std::isinf(b[g][j])) {
              EXPECT_EQ(a[g][j], b[g][j]);
            } else {
              EXPECT_NEAR(a[g][j], b[g][j], 1e-5 * std::max(1.0f, std::abs(b[g][j])));
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace snapkv
