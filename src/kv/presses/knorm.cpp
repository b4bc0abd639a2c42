// snapkv press `knorm`: Devoto et al., "A Simple and Effective L2 Norm-Based Strategy for KV
// Cache Compression", EMNLP 2024, arXiv 2406.11430: keys with a SMALL L2 norm attract attention,
// so the score of position j is -||k_j|| (computed in double, reported as float): the shared base
// keeps the C - W best prefix positions plus the W window positions.
// (The smallest scorer press: an example of how to add one, see scorer.h.)
#include <cmath>

#include "kv/presses/scorer.h"

namespace snapkv::press_detail {
namespace {

class KNormScorer final : public Scorer {
 public:
  HeadScores score(const PressInput& in, int64_t n) const override {
    HeadScores s(in.keys.size(), std::vector<float>(static_cast<size_t>(n)));
    std::vector<float> row(static_cast<size_t>(in.head_dim));
    for (size_t h = 0; h < in.keys.size(); ++h) {
      for (int64_t j = 0; j < n; ++j) {
        in.keys[h].row(j, row.data());
        double ss = 0.0;
        for (float x : row) ss += static_cast<double>(x) * x;
        s[h][static_cast<size_t>(j)] = -static_cast<float>(std::sqrt(ss));
      }
    }
    return s;
  }
};

}  // namespace

const PressDef& knorm_press() {
  static const PressDef def{
      .name = "knorm",
      .doc = "keys with the smallest L2 norm (Devoto et al. 2024, arXiv 2406.11430)",
      .make = [](const ParamValues&) { return std::make_unique<KNormScorer>(); },
  };
  return def;
}

}  // namespace snapkv::press_detail
