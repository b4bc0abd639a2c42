// snapkv press `snapkv`: Li et al., "SnapKV: LLM Knows What You are Looking for Before
// Generation", NeurIPS 2024, arXiv 2404.14469, Sec. 4 / Listing 1. Per layer and KV head h,
// prompt length L, window W, capacity C (window included):
//   1. window queries: the last W prompt queries (after Q-norm and RoPE); keys: the L keys of h;
//   2. logits attn_scale * q_i . k_j, causal inside the window (query i at position L-W+i sees
//      keys 0..L-W+i), softmax over the keys in fp32 with the max subtracted;
//   3. probabilities summed over the W window queries for the prefix positions 0..L-W-1;
//   4. GQA: the query heads of h reduced by mean / max / sum (cfg.gqa_agg), K/V never expanded;
//   5. 1D pooling over positions (kernel K, stride 1, padding K/2, max or avg);
//   6. keep the C-W best pooled prefix positions (ties: earlier first) + the W window positions.
// Steps 1-3: window_attention_scores() (W x L per query head, never L x L); 4: gqa_reduce();
// 5: pool1d(); 6: select_with_window().
#include "kv/presses/presses.h"
#include "kv/presses/scoring.h"

namespace snapkv::press_detail {
namespace {

class SnapKVPress final : public Press {
 public:
  explicit SnapKVPress(const PressConfig& cfg) : cfg_(cfg) {}
  std::string_view name() const override { return "snapkv"; }
  PressResult compress(const PressInput& in, int64_t capacity) const override {
    check_input(in, capacity, name(), true, false);
    if (capacity >= in.n_tokens) return keep_all(in.n_head_kv, in.n_tokens);
    return select_with_window(snapkv_scores(in, cfg_), in.n_tokens, in.window, capacity - in.window);
  }

 private:
  PressConfig cfg_;
};

}  // namespace

std::unique_ptr<Press> make_snapkv_press(const PressConfig& cfg) { return std::make_unique<SnapKVPress>(cfg); }

}  // namespace snapkv::press_detail
