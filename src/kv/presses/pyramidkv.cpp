// snapkv press `pyramidkv`: Cai et al., "PyramidKV: Dynamic KV Cache Compression based on
// Pyramidal Information Funneling", arXiv 2406.02069, Sec. 3. SnapKV's pooled window scores
// (steps 1-5, see snapkv.cpp), but the prefix budget of compressed layer i (in.compress_index
// of in.n_compress_layers) decreases linearly from max = 2P - P/beta (first compressed layer)
// to min = P/beta (last), P = C - W, beta = cfg.pyramid_beta; the window is added on top. The
// budgets of all compressed layers sum to exactly n_compress_layers * P; when the prompt is too
// short for the pyramid (max > L - W) every layer keeps the uniform P (see pyramid_budgets()).
#include "kv/presses/presses.h"
#include "kv/presses/scoring.h"

namespace snapkv::press_detail {
namespace {

class PyramidKVPress final : public Press {
 public:
  explicit PyramidKVPress(const PressConfig& cfg) : cfg_(cfg) {}
  std::string_view name() const override { return "pyramidkv"; }
  PressResult compress(const PressInput& in, int64_t capacity) const override {
    check_input(in, capacity, name(), true, false);
    if (capacity >= in.n_tokens) return keep_all(in.n_head_kv, in.n_tokens);
    const int64_t W = in.window;
    const std::vector<int64_t> budgets =
        pyramid_budgets(capacity - W, in.n_tokens - W, cfg_.pyramid_beta, in.n_compress_layers);
    return select_with_window(snapkv_scores(in, cfg_), in.n_tokens, W, budgets[static_cast<size_t>(in.compress_index)]);
  }

 private:
  PressConfig cfg_;
};

}  // namespace

std::unique_ptr<Press> make_pyramidkv_press(const PressConfig& cfg) { return std::make_unique<PyramidKVPress>(cfg); }

}  // namespace snapkv::press_detail
