// snapkv press `streamingllm`: Xiao et al., "Efficient Streaming Language Models with Attention
// Sinks", ICLR 2024, arXiv 2309.17453, Sec. 3.2, applied once to the prompt: keep the S first
// positions (attention sinks, key sinks, default 4) and the C - S most recent ones, all reported
// with score +inf (kept unconditionally). The scorer ranks positions by recency (score j for
// position j, exact for L <= 2^24); it protects no window of its own, the recent positions win by
// their score (so the window survives whenever C >= W + S, which the spec checks ask). Needs
// C >= S + 1 (at least one recent token).
#include "kv/presses/scorer.h"

namespace snapkv::press_detail {
namespace {

class RecencyScorer final : public Scorer {
 public:
  bool keeps_window() const override { return false; }
  bool reports_scores() const override { return false; }
  HeadScores score(const PressInput& in, int64_t n) const override {
    std::vector<float> s(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) s[static_cast<size_t>(j)] = static_cast<float>(j);
    return HeadScores(static_cast<size_t>(in.n_head_kv), s);
  }
};

}  // namespace

const PressDef& streamingllm_press() {
  static const PressDef def{
      .name = "streamingllm",
      .doc = "attention sinks + the most recent positions (Xiao et al. 2024, arXiv 2309.17453)",
      .sinks = 4,
      .make = [](const ParamValues&) { return std::make_unique<RecencyScorer>(); },
  };
  return def;
}

}  // namespace snapkv::press_detail
