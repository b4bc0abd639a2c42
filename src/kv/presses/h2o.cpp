// snapkv press `h2o`: Zhang et al., "H2O: Heavy-Hitter Oracle for Efficient Generative
// Inference of Large Language Models", NeurIPS 2023, arXiv 2306.14048, Sec. 3, applied once at
// the end of prefill. The score of key j is its accumulated attention over all prompt queries,
// normalised by how many queries can see it:
//   score_j = (sum_{i >= j} softmax_i(j)) / (L - j),   softmax_i over keys 0..i (causal),
// reduced over the query heads of each KV head like SnapKV (cfg.gqa_agg), no pooling. Keeps the
// C - W best prefix positions (0..L-W-1) and the W most recent positions. Computed per query head
// in blocks of kRowBlock query rows (two passes per block: softmax statistics, then the
// accumulation), never an L x L matrix. Cost O(L^2 head_dim) per head: meant for short prompts.
#include <algorithm>

#include "kv/presses/presses.h"
#include "kv/presses/scoring.h"

namespace snapkv::press_detail {
namespace {

constexpr int64_t kRowBlock = 256;

class H2OPress final : public Press {
 public:
  explicit H2OPress(const PressConfig& cfg) : cfg_(cfg) {}
  std::string_view name() const override { return "h2o"; }
  bool needs_all_queries() const override { return true; }
  PressResult compress(const PressInput& in, int64_t capacity) const override {
    check_input(in, capacity, name(), true, true);
    const int64_t L = in.n_tokens;
    if (capacity >= L) return keep_all(in.n_head_kv, L);
    const int64_t W = in.window;
    const int d = in.head_dim;
    const int group = in.n_head / in.n_head_kv;
    HeadScores per_q(static_cast<size_t>(in.n_head));
    for (int h = 0; h < in.n_head; ++h) {
      std::vector<float> acc(static_cast<size_t>(L), 0.0f);
      const RowsView& keys = in.keys[static_cast<size_t>(h / group)];
      for (int64_t r0 = 0; r0 < L; r0 += kRowBlock) {
        const int64_t nr = std::min(kRowBlock, L - r0);
        attention_column_sums(in.all_q + (static_cast<int64_t>(h) * L + r0) * d, nr, r0, keys, in.attn_scale,
                              acc.data(), r0 + nr);
      }
      std::vector<float>& s = per_q[static_cast<size_t>(h)];
      s.resize(static_cast<size_t>(L - W));
      for (int64_t j = 0; j < L - W; ++j) s[j] = acc[j] / static_cast<float>(L - j);
    }
    return select_with_window(gqa_reduce(per_q, in.n_head_kv, cfg_.gqa_agg), L, W, capacity - W);
  }

 private:
  PressConfig cfg_;
};

}  // namespace

std::unique_ptr<Press> make_h2o_press(const PressConfig& cfg) { return std::make_unique<H2OPress>(cfg); }

}  // namespace snapkv::press_detail
