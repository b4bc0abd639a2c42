// snapkv press `random`: a control baseline (as in kvpress' RandomPress): C - W prefix positions
// drawn uniformly without replacement, plus the W window positions. Deterministic: position j of
// KV head h in layer l gets the score u = splitmix64(seed, l, h, j) / 2^64 in [0, 1) and the
// C - W highest scores are kept, so a seed (key seed) always gives the same selection.
#include "kv/presses/scorer.h"

namespace snapkv::press_detail {
namespace {

/// SplitMix64 finaliser (Steele et al. 2014): a bijective 64-bit mixer.
uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

class RandomScorer final : public Scorer {
 public:
  explicit RandomScorer(uint64_t seed) : seed_(seed) {}
  HeadScores score(const PressInput& in, int64_t n) const override {
    HeadScores s(in.keys.size(), std::vector<float>(static_cast<size_t>(n)));
    for (size_t h = 0; h < in.keys.size(); ++h) {
      const uint64_t base = splitmix64(splitmix64(splitmix64(seed_) ^ static_cast<uint64_t>(in.layer)) ^ h);
      for (int64_t j = 0; j < n; ++j) {
        const uint64_t u = splitmix64(base ^ static_cast<uint64_t>(j));
        s[h][static_cast<size_t>(j)] = static_cast<float>(u >> 40) * 0x1p-24f;  // 24 random bits in [0, 1)
      }
    }
    return s;
  }

 private:
  uint64_t seed_;
};

}  // namespace

const PressDef& random_press() {
  static const PressDef def{
      .name = "random",
      .doc = "uniformly random positions, deterministic per seed (control baseline)",
      .params = {u64_param("seed", 0, "seed of the per-(layer, KV head, position) random scores")},
      .make = [](const ParamValues& p) { return std::make_unique<RandomScorer>(p.u64("seed")); },
  };
  return def;
}

}  // namespace snapkv::press_detail
