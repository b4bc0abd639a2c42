// snapkv presses: the budget allocators uniform / pyramid / ada (see press_base.h). Each wraps
// any scorer: the key `alloc` of every compressing press picks one.
#include <fmt/format.h>

#include "kv/presses/press_base.h"
#include "snapkv/error.h"

namespace snapkv::press_detail {
namespace {

/// Per head, the top k of positions first..n-1 (positions reported in the full range).
std::vector<std::vector<int32_t>> top_k_each(const HeadScores& scores, int64_t first, int64_t k) {
  std::vector<std::vector<int32_t>> out;
  out.reserve(scores.size());
  for (const auto& s : scores) {
    std::vector<int32_t> p = top_k_positions(s.data() + first, static_cast<int64_t>(s.size()) - first, k);
    for (int32_t& x : p) x += static_cast<int32_t>(first);
    out.push_back(std::move(p));
  }
  return out;
}

/// Every head keeps its own k best candidates.
class UniformAllocator final : public Allocator {
 public:
  std::vector<std::vector<int32_t>> pick(const HeadScores& scores, int64_t first, int64_t k,
                                         const PressInput&) const override {
    return top_k_each(scores, first, k);
  }
};

/// PyramidKV: compressed layer i (in.compress_index of in.n_compress_layers) keeps k_i per head,
/// decreasing from the first compressed layer to the last; sum_i k_i = n_layers * k.
class PyramidAllocator final : public Allocator {
 public:
  explicit PyramidAllocator(double beta) : beta_(beta) {}
  std::vector<std::vector<int32_t>> pick(const HeadScores& scores, int64_t first, int64_t k,
                                         const PressInput& in) const override {
    const int64_t n = scores.empty() ? 0 : static_cast<int64_t>(scores[0].size());
    const std::vector<int64_t> budgets = pyramid_budgets(k, n - first, beta_, in.n_compress_layers);
    return top_k_each(scores, first, budgets[static_cast<size_t>(in.compress_index)]);
  }

 private:
  double beta_;
};

/// AdaKV: the layer's H * k picks shared by its heads (floor(alpha k) safeguard per head).
class AdaAllocator final : public Allocator {
 public:
  explicit AdaAllocator(double alpha) : alpha_(alpha) {}
  std::vector<std::vector<int32_t>> pick(const HeadScores& scores, int64_t first, int64_t k,
                                         const PressInput&) const override {
    if (first == 0) return adaptive_top_k(scores, k, alpha_);
    HeadScores cand;
    cand.reserve(scores.size());
    for (const auto& s : scores) cand.emplace_back(s.begin() + first, s.end());
    std::vector<std::vector<int32_t>> out = adaptive_top_k(cand, k, alpha_);
    for (auto& p : out)
      for (int32_t& x : p) x += static_cast<int32_t>(first);
    return out;
  }

 private:
  double alpha_;
};

}  // namespace

std::unique_ptr<Allocator> make_allocator(const ParamValues& p) {
  const std::string alloc = p.text("alloc");
  if (alloc == "uniform") return std::make_unique<UniformAllocator>();
  if (alloc == "pyramid") return std::make_unique<PyramidAllocator>(p.real("beta"));
  if (alloc == "ada") return std::make_unique<AdaAllocator>(p.real("alpha"));
  throw Error(fmt::format("press {}: internal error: unknown allocator '{}'", p.press(), alloc));
}

}  // namespace snapkv::press_detail
