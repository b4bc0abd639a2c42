// snapkv press `knorm`: Devoto et al., "A Simple and Effective L2 Norm-Based Strategy for KV
// Cache Compression", EMNLP 2024, arXiv 2406.11430: keys with a SMALL L2 norm attract attention,
// so keep the C - W prefix positions whose key has the smallest L2 norm, plus the W window
// positions. The reported score of a kept prefix position is -||k_j|| (higher is better).
#include <cmath>

#include "kv/presses/presses.h"
#include "kv/presses/scoring.h"

namespace snapkv::press_detail {
namespace {

class KNormPress final : public Press {
 public:
  std::string_view name() const override { return "knorm"; }
  PressResult compress(const PressInput& in, int64_t capacity) const override {
    check_input(in, capacity, name(), true, false);
    const int64_t L = in.n_tokens;
    if (capacity >= L) return keep_all(in.n_head_kv, L);
    const int64_t W = in.window;
    HeadScores scores(in.keys.size(), std::vector<float>(static_cast<size_t>(L - W)));
    std::vector<float> row(static_cast<size_t>(in.head_dim));
    for (size_t h = 0; h < in.keys.size(); ++h) {
      for (int64_t j = 0; j < L - W; ++j) {
        in.keys[h].row(j, row.data());
        double ss = 0.0;
        for (float x : row) ss += static_cast<double>(x) * x;
        scores[h][static_cast<size_t>(j)] = -static_cast<float>(std::sqrt(ss));
      }
    }
    return select_with_window(scores, L, W, capacity - W);
  }
};

}  // namespace

std::unique_ptr<Press> make_knorm_press(const PressConfig&) { return std::make_unique<KNormPress>(); }

}  // namespace snapkv::press_detail
