// snapkv presses: Press::plan() and the shared base of the scorer presses (steps in press_base.h).
#include "kv/presses/press_base.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "kv/presses/span_closing.h"
#include "snapkv/error.h"

namespace snapkv {

Press::Plan Press::plan(int64_t n_tokens, int64_t question_tokens) const {
  const PressSettings& s = settings_;
  const int64_t L = n_tokens;
  if (L < 0) throw Error(fmt::format("press {}: plan: n_tokens = {} must be >= 0", name(), L));
  if (question_tokens < 0 || question_tokens > L)
    throw Error(fmt::format("press {}: plan: question_tokens = {} must be in [0, {}] (the prompt's tokens)", name(),
                            question_tokens, L));
  if (!s.compresses) return {false, L, "press none keeps every token", 0};
  int W = s.window;
  if (s.question_window) {
    const int64_t q = question_tokens > 0 ? question_tokens : kDefaultQuestionWindow;
    W = static_cast<int>(std::clamp<int64_t>(q, s.window_min, s.window));
  }
  return plan_with_window(L, W);
}

Press::Plan Press::plan_with_window(int64_t L, int W) const {
  const PressSettings& s = settings_;
  const bool by_ratio = s.ratio >= 0;
  // kvpress convention: a ratio removes floor(L * ratio) positions.
  const int64_t C = by_ratio ? L - static_cast<int64_t>(std::floor(static_cast<double>(L) * s.ratio)) : s.budget;
  if (L <= C) {
    return {false, C,
            by_ratio ? fmt::format("prompt of {} tokens fits the capacity {} left by ratio={}", L, C, s.ratio)
                     : fmt::format("prompt of {} tokens fits the budget {}", L, C),
            W};
  }
  const int64_t keep = W + s.sinks;
  if (L <= keep) {
    return {false, C,
            fmt::format("prompt of {} tokens is too short to compress (window={} + sinks={} are always kept)", L, W,
                        s.sinks),
            W};
  }
  // Only a ratio can get here with C < W + S (a budget below it is rejected by the spec checks):
  // an error, never a silently weakened ratio nor an evicted window.
  if (C < keep) {
    throw Error(fmt::format(
        "press {}: ratio={} leaves {} of {} prompt tokens per KV head, fewer than window={} + sinks={} that are always "
        "kept (use a smaller ratio or window)",
        name(), s.ratio, C, L, W, s.sinks));
  }
  return {true, C, {}, W};
}

namespace press_detail {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

class ScorerPress final : public Press {
 public:
  ScorerPress(PressSpec canonical, PressSettings settings, std::unique_ptr<Scorer> scorer,
              std::unique_ptr<Allocator> alloc)
      : Press(std::move(canonical), settings), scorer_(std::move(scorer)), alloc_(std::move(alloc)) {}

  bool needs_all_queries() const override { return scorer_->needs_all_queries(); }

  PressResult compress(const PressInput& in, int64_t capacity) const override {
    check_input(in, capacity, name(), true, scorer_->needs_all_queries());
    const int64_t L = in.n_tokens;
    if (capacity >= L) return keep_all(in.n_head_kv, L);
    const int64_t W = in.window, S = sinks();
    if (capacity < W + S) {  // S = 0 was checked by check_input()
      throw Error(fmt::format("press {}, layer {}: capacity {} must be >= window {} + sinks {} = {}", name(), in.layer,
                              capacity, W, S, W + S));
    }
    const HeadScores scores = scorer_->score(in, L - W);
    if (static_cast<int64_t>(scores.size()) != in.n_head_kv)
      throw Error(fmt::format("press {}, layer {}: scorer returned {} heads, expected {}", name(), in.layer,
                              scores.size(), in.n_head_kv));
    for (const auto& s : scores)
      if (static_cast<int64_t>(s.size()) != L - W)
        throw Error(fmt::format("press {}, layer {}: scorer returned {} scores, expected {}", name(), in.layer,
                                s.size(), L - W));
    std::vector<std::vector<int32_t>> picks = alloc_->pick(scores, S, capacity - W - S, in);
    if (settings().span_gap > 0)
      for (size_t h = 0; h < picks.size(); ++h)
        picks[h] = close_spans(picks[h], scores[h], S, L - W, settings().span_gap);
    const bool reported = scorer_->reports_scores();
    PressResult res;
    res.kept.resize(scores.size());
    res.scores.resize(scores.size());
    for (size_t h = 0; h < scores.size(); ++h) {
      std::vector<int32_t>& kept = res.kept[h];
      std::vector<float>& sc = res.scores[h];
      kept.reserve(static_cast<size_t>(S + W) + picks[h].size());
      sc.reserve(kept.capacity());
      for (int64_t j = 0; j < S; ++j) {
        kept.push_back(static_cast<int32_t>(j));
        sc.push_back(kInf);
      }
      for (int32_t p : picks[h]) {
        kept.push_back(p);
        sc.push_back(reported ? scores[h][static_cast<size_t>(p)] : kInf);
      }
      for (int64_t j = L - W; j < L; ++j) {
        kept.push_back(static_cast<int32_t>(j));
        sc.push_back(kInf);
      }
    }
    return res;
  }

 private:
  std::unique_ptr<Scorer> scorer_;
  std::unique_ptr<Allocator> alloc_;
};

class KeepAllPress final : public Press {
 public:
  explicit KeepAllPress(PressSpec canonical) : Press(std::move(canonical), PressSettings{}) {}
  PressResult compress(const PressInput& in, int64_t capacity) const override {
    check_input(in, capacity, name(), false, false);
    return keep_all(in.n_head_kv, in.n_tokens);
  }
};

}  // namespace

std::unique_ptr<Press> make_scorer_press(PressSpec canonical, PressSettings settings, std::unique_ptr<Scorer> scorer,
                                         std::unique_ptr<Allocator> alloc) {
  return std::make_unique<ScorerPress>(std::move(canonical), settings, std::move(scorer), std::move(alloc));
}

std::unique_ptr<Press> make_keep_all_press(PressSpec canonical) {
  return std::make_unique<KeepAllPress>(std::move(canonical));
}

}  // namespace press_detail
}  // namespace snapkv
