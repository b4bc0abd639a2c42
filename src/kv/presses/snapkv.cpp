// snapkv press `snapkv`: Li et al., "SnapKV: LLM Knows What You are Looking for Before
// Generation", NeurIPS 2024, arXiv 2404.14469, Sec. 4 / Listing 1. Per layer and KV head h,
// prompt length L, window W, capacity C (window included):
//   1. window queries: the last W prompt queries (after Q-norm and RoPE); keys: the L keys of h;
//   2. logits attn_scale * q_i . k_j, causal inside the window (query i at position L-W+i sees
//      keys 0..L-W+i), softmax over the keys in fp32 with the max subtracted;
//   3. probabilities summed over the W window queries for the prefix positions 0..L-W-1;
//   4. GQA: the query heads of h reduced by mean / max / sum (key gqa_agg), K/V never expanded;
//   5. 1D pooling over positions (key kernel, stride 1, padding kernel/2, key pool max or avg);
//   6. keep the C-W best pooled prefix positions (ties: earlier first) + the W window positions.
// Steps 1-3: window_attention_scores() (W x L per query head, never L x L); 4: gqa_reduce();
// 5: pool1d(); this file is the scorer (steps 1-5); step 6 is the shared base (press_base.h).
#include "kv/presses/scorer.h"

namespace snapkv::press_detail {
namespace {

class SnapKVScorer final : public Scorer {
 public:
  explicit SnapKVScorer(const ParamValues& p)
      : kernel_(static_cast<int>(p.integer("kernel"))), pool_(pool_type(p)), agg_(gqa_agg(p)) {}
  HeadScores score(const PressInput& in, int64_t) const override { return snapkv_scores(in, kernel_, pool_, agg_); }

 private:
  int kernel_;
  PoolType pool_;
  GQAAgg agg_;
};

}  // namespace

const PressDef& snapkv_press() {
  static const PressDef def{
      .name = "snapkv",
      .doc = "pooled attention of the last window queries (Li et al. 2024, arXiv 2404.14469)",
      .params = {kernel_param(), pool_param(), gqa_agg_param()},
      .make = [](const ParamValues& p) { return std::make_unique<SnapKVScorer>(p); },
  };
  return def;
}

}  // namespace snapkv::press_detail
