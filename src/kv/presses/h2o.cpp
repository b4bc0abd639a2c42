// snapkv press `h2o`: Zhang et al., "H2O: Heavy-Hitter Oracle for Efficient Generative
// Inference of Large Language Models", NeurIPS 2023, arXiv 2306.14048, Sec. 3, applied once at
// the end of prefill. The score of key j is its accumulated attention over all prompt queries,
// normalised by how many queries can see it:
//   score_j = (sum_{i >= j} softmax_i(j)) / (L - j),   softmax_i over keys 0..i (causal),
// reduced over the query heads of each KV head like SnapKV (key gqa_agg), no pooling. Keeps the
// C - W best prefix positions (0..L-W-1) and the W most recent positions. Computed per query head
// in blocks of kRowBlock query rows (two passes per block: softmax statistics, then the
// accumulation), never an L x L matrix. Cost O(L^2 head_dim) per head: meant for short prompts.
#include <algorithm>

#include "kv/presses/scorer.h"

namespace snapkv::press_detail {
namespace {

constexpr int64_t kRowBlock = 256;

class H2OScorer final : public Scorer {
 public:
  explicit H2OScorer(const ParamValues& p) : agg_(gqa_agg(p)) {}
  bool needs_all_queries() const override { return true; }
  HeadScores score(const PressInput& in, int64_t n) const override {
    const int64_t L = in.n_tokens;
    const int d = in.head_dim;
    const int group = in.n_head / in.n_head_kv;
    HeadScores per_q(static_cast<size_t>(in.n_head));
    for (int h = 0; h < in.n_head; ++h) {
      std::vector<float> acc(static_cast<size_t>(L), 0.0f);
      const RowsView& keys = in.keys[static_cast<size_t>(h / group)];
      for (int64_t r0 = 0; r0 < L; r0 += kRowBlock) {
        const int64_t nr = std::min(kRowBlock, L - r0);
        attention_column_sums(in.all_q + (static_cast<int64_t>(h) * L + r0) * d, nr, r0, keys, in.attn_scale,
                              acc.data(), r0 + nr, 0, in.n_threads);
      }
      std::vector<float>& s = per_q[static_cast<size_t>(h)];
      s.resize(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) s[j] = acc[j] / static_cast<float>(L - j);
    }
    return gqa_reduce(per_q, in.n_head_kv, agg_);
  }

 private:
  GQAAgg agg_;
};

}  // namespace

const PressDef& h2o_press() {
  static const PressDef def{
      .name = "h2o",
      .doc = "attention accumulated over all prompt queries (Zhang et al. 2023, arXiv 2306.14048); O(L^2)",
      .params = {gqa_agg_param()},
      .make = [](const ParamValues& p) { return std::make_unique<H2OScorer>(p); },
  };
  return def;
}

}  // namespace snapkv::press_detail
