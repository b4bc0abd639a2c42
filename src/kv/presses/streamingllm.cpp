// snapkv press `streamingllm`: Xiao et al., "Efficient Streaming Language Models with Attention
// Sinks", ICLR 2024, arXiv 2309.17453, Sec. 3.2, applied once to the prompt: keep the S first
// positions (attention sinks, key sinks, default 4) and the C - S most recent ones, all reported
// with score +inf (kept unconditionally). As a scorer: position j scores j (recency; exact for
// L <= 2^24), so the shared base keeps the sinks, the window and the C - W - S most recent
// prefix positions, i.e. the C - S most recent positions. Needs C >= W + S.
#include "kv/presses/scorer.h"

namespace snapkv::press_detail {
namespace {

class RecencyScorer final : public Scorer {
 public:
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
