// snapkv press `tova`: Oren et al., "Transformers are Multi-State RNNs" (TOVA), arXiv
// 2401.06104, Sec. 4, applied once to the prompt: the score of prefix position j is the
// attention the LAST prompt query (position L-1, window row W-1) pays to it (softmax over keys
// 0..L-1), reduced over the query heads of each KV head (cfg.gqa_agg), no pooling. Keeps the
// C - W best prefix positions and the W window positions.
#include "kv/presses/presses.h"
#include "kv/presses/scoring.h"

namespace snapkv::press_detail {
namespace {

class TOVAPress final : public Press {
 public:
  explicit TOVAPress(const PressConfig& cfg) : cfg_(cfg) {}
  std::string_view name() const override { return "tova"; }
  PressResult compress(const PressInput& in, int64_t capacity) const override {
    check_input(in, capacity, name(), true, false);
    if (capacity >= in.n_tokens) return keep_all(in.n_head_kv, in.n_tokens);
    const HeadScores kv = gqa_reduce(window_attention_scores(in, in.window - 1), in.n_head_kv, cfg_.gqa_agg);
    return select_with_window(kv, in.n_tokens, in.window, capacity - in.window);
  }

 private:
  PressConfig cfg_;
};

}  // namespace

std::unique_ptr<Press> make_tova_press(const PressConfig& cfg) { return std::make_unique<TOVAPress>(cfg); }

}  // namespace snapkv::press_detail
