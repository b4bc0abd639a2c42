// snapkv press `random`: a control baseline (as in kvpress' RandomPress): C - W prefix positions
// drawn uniformly without replacement, plus the W window positions. Deterministic: position j of
// KV head h in layer l gets the score u = splitmix64(seed, l, h, j) / 2^64 in [0, 1) and the
// C - W highest scores are kept, so a seed (cfg.seed) always gives the same selection.
#include "kv/presses/presses.h"
#include "kv/presses/scoring.h"

namespace snapkv::press_detail {
namespace {

/// SplitMix64 finaliser (Steele et al. 2014): a bijective 64-bit mixer.
uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

class RandomPress final : public Press {
 public:
  explicit RandomPress(const PressConfig& cfg) : seed_(cfg.seed) {}
  std::string_view name() const override { return "random"; }
  PressResult compress(const PressInput& in, int64_t capacity) const override {
    check_input(in, capacity, name(), true, false);
    const int64_t L = in.n_tokens;
    if (capacity >= L) return keep_all(in.n_head_kv, L);
    const int64_t W = in.window;
    HeadScores scores(in.keys.size(), std::vector<float>(static_cast<size_t>(L - W)));
    for (size_t h = 0; h < in.keys.size(); ++h) {
      const uint64_t base = splitmix64(splitmix64(splitmix64(seed_) ^ static_cast<uint64_t>(in.layer)) ^ h);
      for (int64_t j = 0; j < L - W; ++j) {
        const uint64_t u = splitmix64(base ^ static_cast<uint64_t>(j));
        scores[h][static_cast<size_t>(j)] = static_cast<float>(u >> 40) * 0x1p-24f;  // 24 random bits in [0, 1)
      }
    }
    return select_with_window(scores, L, W, capacity - W);
  }

 private:
  uint64_t seed_;
};

}  // namespace

std::unique_ptr<Press> make_random_press(const PressConfig& cfg) { return std::make_unique<RandomPress>(cfg); }

}  // namespace snapkv::press_detail
