// snapkv press `adakv`: Feng et al., "Ada-KV: Optimizing KV Cache Eviction by Adaptive Budget
// Allocation for Efficient LLM Inference", arXiv 2407.11550, Alg. 1 (with its safeguard).
// Per layer: SnapKV pooled window scores per KV head (steps 1-5, see snapkv.cpp); the layer's
// H_kv * (C - W) prefix slots are shared by the heads: each head first gets its own top
// floor(alpha * (C - W)) positions (alpha = cfg.adakv_alpha), the rest go to the highest
// remaining scores of all heads together; every head also keeps the W window positions. Heads
// end with different lengths; the layer total is exactly H_kv * C. With one KV head this is
// SnapKV.
#include "kv/presses/presses.h"
#include "kv/presses/scoring.h"

namespace snapkv::press_detail {
namespace {

class AdaKVPress final : public Press {
 public:
  explicit AdaKVPress(const PressConfig& cfg) : cfg_(cfg) {}
  std::string_view name() const override { return "adakv"; }
  PressResult compress(const PressInput& in, int64_t capacity) const override {
    check_input(in, capacity, name(), true, false);
    if (capacity >= in.n_tokens) return keep_all(in.n_head_kv, in.n_tokens);
    const HeadScores scores = snapkv_scores(in, cfg_);
    const auto picks = adaptive_top_k(scores, capacity - in.window, cfg_.adakv_alpha);
    PressResult res;
    for (size_t h = 0; h < scores.size(); ++h) append_head(res, picks[h], scores[h], in.n_tokens, in.window);
    return res;
  }

 private:
  PressConfig cfg_;
};

}  // namespace

std::unique_ptr<Press> make_adakv_press(const PressConfig& cfg) { return std::make_unique<AdaKVPress>(cfg); }

}  // namespace snapkv::press_detail
