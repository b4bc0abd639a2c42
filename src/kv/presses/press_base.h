// snapkv presses: the shared base every scorer press runs through, and the budget allocators.
//
// compress(in, C) of a scorer press (press_base.cpp):
//   1. check_input(); C >= L: keep everything;
//   2. protected positions: the S sinks 0..S-1 and the W window positions L-W..L-1 (W =
//      in.window), kept with score +inf; C >= W + S is required;
//   3. scores = scorer.score(in, L - W): [n_head_kv][L - W];
//   4. the allocator picks, per KV head, positions among the candidates S..L-W-1 for a free
//      budget of k = C - W - S per head (uniform: exactly k per head; pyramid: k_i per head in
//      compressed layer i, the layers' k_i summing to n_layers * k; ada: the layer's H * k picks
//      shared by the heads), by top-k with deterministic ties (higher score first, the earlier
//      position on ties, NaN as -inf);
//   4b. span_gap G > 0: the picks of each head are closed (span_closing.h): holes of up to G
//      positions filled, paid for by the lowest-scored run ends, same count per head;
//   5. kept = sinks + picks + window, ascending; scores = +inf, the picks' scores (+inf when the
//      scorer does not reports_scores()), +inf.
// With S = 0 this is exactly the SnapKV / PyramidKV / AdaKV selection of the papers.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kv/presses/press.h"
#include "kv/presses/scorer.h"

namespace snapkv::press_detail {

/// Distributes a free budget over the KV heads (and layers) of a layer's candidate positions.
class Allocator {
 public:
  virtual ~Allocator() = default;
  /// Per KV head, the ascending picks among positions first..n-1 of scores[h] (n =
  /// scores[h].size(), the same for every head) for k free slots per head on average; k <= n - first.
  virtual std::vector<std::vector<int32_t>> pick(const HeadScores& scores, int64_t first, int64_t k,
                                                 const PressInput& in) const = 0;
};

/// The allocator of a canonical spec: alloc=uniform; alloc=pyramid with `beta` (PyramidKV, Cai et
/// al. 2024, arXiv 2406.02069, see pyramid_budgets()); alloc=ada with `alpha` (AdaKV, Feng et al.
/// 2024, arXiv 2407.11550, see adaptive_top_k()).
std::unique_ptr<Allocator> make_allocator(const ParamValues& p);

/// The shared base over `scorer` and `alloc` (steps above); `canonical` and `settings` as the
/// factory resolved them.
std::unique_ptr<Press> make_scorer_press(PressSpec canonical, PressSettings settings, std::unique_ptr<Scorer> scorer,
                                         std::unique_ptr<Allocator> alloc);

/// `none`: keeps every position (still validates the layer input).
std::unique_ptr<Press> make_keep_all_press(PressSpec canonical);

}  // namespace snapkv::press_detail
