// Span-preserving selection (key span_gap, issue 11): close_spans() on hand-made cases, and the
// selection properties of every scorer press with span_gap > 0 (exact budget, window and sinks
// kept, no hole of 1..G positions, ascending; G = 0 identical to the plain press).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "kv/presses/span_closing.h"
#include "press_test_util.h"

namespace snapkv::test {
namespace {

using press_detail::close_spans;

std::vector<float> scores_of(std::initializer_list<std::pair<int, float>> set, int n) {
  std::vector<float> s(static_cast<size_t>(n), 0.0f);
  for (const auto& [p, v] : set) s[static_cast<size_t>(p)] = v;
  return s;
}

TEST(SpanClosing, GapZeroReturnsThePicks) {
  const std::vector<int32_t> picks = {1, 3, 9};
  EXPECT_EQ(close_spans(picks, std::vector<float>(20, 1.0f), 0, 20, 0), picks);
}

// Holes 4,5 (two positions) between 3 and 6 are filled; the two extra positions are paid by the
// lowest run end (12, score 1) and then, of the ends 2 and 7 (both 5), the later one.
TEST(SpanClosing, FillsHolesAndPaysWithTheLowestRunEnds) {
  const auto s = scores_of({{2, 5}, {3, 4}, {4, 0.1f}, {5, 0.2f}, {6, 4}, {7, 5}, {12, 1}}, 20);
  EXPECT_EQ(close_spans({2, 3, 6, 7, 12}, s, 0, 20, 2), (std::vector<int32_t>{2, 3, 4, 5, 6}));
  // A hole longer than the gap stays open: nothing changes.
  EXPECT_EQ(close_spans({2, 3, 6, 7, 12}, s, 0, 20, 1), (std::vector<int32_t>{2, 3, 6, 7, 12}));
}

// The sinks (0, 1) and the window (from 15) count as kept: the hole {2} after the sinks is
// filled; the run [sinks, 2, 3] can only lose its right end.
TEST(SpanClosing, SinksAndWindowCloseHolesButAreNeverDropped) {
  const auto s = scores_of({{2, 0}, {3, 2}, {10, 3}, {13, 9}}, 15);
  EXPECT_EQ(close_spans({3, 10}, s, 2, 15, 2), (std::vector<int32_t>{2, 10}));
  // With the window from 13 the hole {11, 12} before it is filled too (3 filled in all): the
  // run [sinks, 2, 3] loses 3 (score 2), then 2 (score 0), and the run [10, window] loses 10.
  const auto t = scores_of({{2, 0}, {3, 2}, {10, 3}, {11, 5}, {12, 5}}, 13);
  EXPECT_EQ(close_spans({3, 10}, t, 2, 13, 3), (std::vector<int32_t>{11, 12}));
}

// One run covers every candidate between the sinks and the window: the lowest-scored goes.
TEST(SpanClosing, OneRunOverEverythingDropsItsLowest) {
  const std::vector<float> s = {9, 3, 1, 0.5f, 4};
  EXPECT_EQ(close_spans({1, 2, 4}, s, 1, 5, 1), (std::vector<int32_t>{1, 2, 4}));
}

// A 7-digit number at 50..56 whose middle digits scored below the top-k (the case of issue 11):
// with G >= 3 the whole number is kept; the payment comes from isolated low picks.
TEST(SpanClosing, KeepsANumberWhoseMiddleDigitsWereEvicted) {
  std::vector<float> s(100, 0.0f);
  for (int p : {50, 51, 55, 56}) s[static_cast<size_t>(p)] = 10;
  for (int p : {52, 53, 54}) s[static_cast<size_t>(p)] = 0.5f;
  s[20] = 1, s[30] = 2, s[80] = 3, s[90] = 4;
  const std::vector<int32_t> picks = {20, 30, 50, 51, 55, 56, 80, 90};
  EXPECT_EQ(close_spans(picks, s, 0, 100, 4), (std::vector<int32_t>{50, 51, 52, 53, 54, 55, 56, 90}));
  EXPECT_EQ(close_spans(picks, s, 0, 100, 2), picks);  // the hole of 3 is longer than G = 2
}

PressConfig plain(const std::string& name, int64_t C, int W) {
  PressConfig cfg;
  cfg.name = name;
  cfg.budget = C;
  cfg.window = W;
  return cfg;
}

/// Largest run of unkept positions strictly between two kept ones (or a sink / the window).
void expect_no_small_holes(const std::vector<int32_t>& kept, int64_t G, const std::string& what) {
  for (size_t i = 1; i < kept.size(); ++i) {
    const int64_t holes = kept[i] - kept[i - 1] - 1;
    EXPECT_TRUE(holes == 0 || holes > G) << what << ": hole of " << holes << " after " << kept[i - 1];
  }
}

TEST(SpanClosing, EveryScorerPressKeepsItsBudgetWindowAndSinks) {
  const int W = 8;
  const int64_t L = 300;
  const Layer l = Layer::random(L, 4, 2, 16, W, true, 11, 2.0f);
  const PressInput in = l.input(1, 3);
  for (const std::string& name : press_names()) {
    if (name == "none") continue;
    for (int64_t C : {int64_t{40}, int64_t{100}, int64_t{200}}) {
      const PressSpec base = to_spec(plain(name, C, W));
      const PressResult ref = make_press(base)->compress(in, C);
      PressSpec zero = base;
      zero.set("span_gap", "0");
      const PressResult r0 = make_press(zero)->compress(in, C);
      EXPECT_EQ(r0.kept, ref.kept) << name << " C=" << C << ": span_gap=0 must be the plain selection";
      for (int64_t G : {1, 2, 4, 8}) {
        PressSpec spec = base;
        spec.set("span_gap", std::to_string(G));
        const std::string what = fmt::format("{} C={} G={}", spec.to_string(), C, G);
        const PressResult r = make_press(spec)->compress(in, C);
        ASSERT_EQ(r.kept.size(), ref.kept.size()) << what;
        const int64_t S = make_press(spec)->sinks();
        for (size_t h = 0; h < r.kept.size(); ++h) {
          const auto& k = r.kept[h];
          EXPECT_EQ(k.size(), ref.kept[h].size()) << what << " head " << h;  // same count per head (ada too)
          EXPECT_TRUE(std::is_sorted(k.begin(), k.end()) && std::adjacent_find(k.begin(), k.end()) == k.end()) << what;
          for (int64_t j = 0; j < S; ++j) EXPECT_TRUE(std::binary_search(k.begin(), k.end(), j)) << what;
          for (int64_t j = L - W; j < L; ++j) EXPECT_TRUE(std::binary_search(k.begin(), k.end(), j)) << what;
          ASSERT_EQ(r.scores[h].size(), k.size()) << what;
          expect_no_small_holes(k, G, what + fmt::format(" head {}", h));
        }
      }
    }
  }
}

TEST(SpanClosing, SpecKeyIsValidatedAndDocumented) {
  EXPECT_THROW(validate_press_spec(PressSpec::parse("snapkv:span_gap=-1")), Error);
  EXPECT_THROW(validate_press_spec(PressSpec::parse("snapkv:span_gap=x")), Error);
  EXPECT_THROW(validate_press_spec(PressSpec::parse("none:span_gap=2")), Error);
  EXPECT_NO_THROW(validate_press_spec(PressSpec::parse("snapkv:budget=64,span_gap=4")));
  bool documented = false;
  for (const auto& p : press_params("snapkv")) documented |= p.key == "span_gap" && p.default_value == "0";
  EXPECT_TRUE(documented);
}

}  // namespace
}  // namespace snapkv::test
