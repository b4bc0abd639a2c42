// snapkv press `tova`: Oren et al., "Transformers are Multi-State RNNs" (TOVA), arXiv
// 2401.06104, Sec. 4, applied once to the prompt: the score of prefix position j is the
// attention the LAST prompt query (position L-1, window row W-1) pays to it (softmax over keys
// 0..L-1), reduced over the query heads of each KV head (key gqa_agg), no pooling. Keeps the
// C - W best prefix positions and the W window positions.
#include "kv/presses/scorer.h"

namespace snapkv::press_detail {
namespace {

class TOVAScorer final : public Scorer {
 public:
  explicit TOVAScorer(const ParamValues& p) : agg_(gqa_agg(p)) {}
  HeadScores score(const PressInput& in, int64_t) const override {
    return gqa_reduce(window_attention_scores(in, in.window - 1), in.n_head_kv, agg_);
  }

 private:
  GQAAgg agg_;
};

}  // namespace

const PressDef& tova_press() {
  static const PressDef def{
      .name = "tova",
      .doc = "attention of the last prompt query (Oren et al. 2024, arXiv 2401.06104)",
      .params = {gqa_agg_param()},
      .make = [](const ParamValues& p) { return std::make_unique<TOVAScorer>(p); },
  };
  return def;
}

}  // namespace snapkv::press_detail
