// snapkv presses: GQA reduction, pooling, top-k selection, input checks, PyramidKV budgets and
// AdaKV head-adaptive selection (see scoring.h for the formulas and sources).
#include "kv/presses/scoring.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "snapkv/error.h"

namespace snapkv::press_detail {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

/// NaN ranks as -inf so the ordering below is a strict weak order.
inline float rank_value(float x) { return std::isnan(x) ? -kInf : x; }

}  // namespace

HeadScores gqa_reduce(const HeadScores& per_qhead, int n_head_kv, GQAAgg agg) {
  const int n_head = static_cast<int>(per_qhead.size());
  const int group = n_head / n_head_kv;
  const size_t n = per_qhead.empty() ? 0 : per_qhead[0].size();
  HeadScores out(static_cast<size_t>(n_head_kv), std::vector<float>(n));
  for (int kv = 0; kv < n_head_kv; ++kv) {
    std::vector<float>& o = out[static_cast<size_t>(kv)];
    o = per_qhead[static_cast<size_t>(kv * group)];
    for (int g = 1; g < group; ++g) {
      const std::vector<float>& x = per_qhead[static_cast<size_t>(kv * group + g)];
      if (agg == GQAAgg::Max) {
        for (size_t j = 0; j < n; ++j) o[j] = std::max(o[j], x[j]);
      } else {
        for (size_t j = 0; j < n; ++j) o[j] += x[j];
      }
    }
    if (agg == GQAAgg::Mean && group > 1) {
      const float inv = 1.0f / static_cast<float>(group);
      for (size_t j = 0; j < n; ++j) o[j] *= inv;
    }
  }
  return out;
}

std::vector<float> pool1d(const std::vector<float>& x, int kernel, PoolType type) {
  if (kernel < 1 || kernel % 2 == 0) throw Error(fmt::format("pooling kernel must be odd and >= 1, got {}", kernel));
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> y(x.size());
  if (n == 0 || kernel == 1) return x;
  const int64_t half = std::min<int64_t>(kernel / 2, n);  // a wider window clips to [0, n) anyway
  if (type == PoolType::Avg) {
    // Sums over the clipped window from prefix sums (double), divided by the full kernel.
    std::vector<double> pre(static_cast<size_t>(n + 1), 0.0);
    for (int64_t j = 0; j < n; ++j) pre[j + 1] = pre[j] + x[j];
    for (int64_t j = 0; j < n; ++j) {
      const int64_t a = std::max<int64_t>(0, j - half), b = std::min<int64_t>(n, j + half + 1);
      y[j] = static_cast<float>((pre[b] - pre[a]) / kernel);
    }
    return y;
  }
  // Max: van Herk / Gil-Werman over the sequence padded with -inf by `half` on both sides;
  // window of output j = padded [j, j + 2 half], split in blocks of w = 2 half + 1.
  const int64_t w = 2 * half + 1;
  const int64_t np = n + 2 * half;
  std::vector<float> pad(static_cast<size_t>(np), -kInf), g(static_cast<size_t>(np)), h(static_cast<size_t>(np));
  for (int64_t j = 0; j < n; ++j) pad[j + half] = x[j];
  for (int64_t j = 0; j < np; ++j) g[j] = (j % w == 0) ? pad[j] : std::max(g[j - 1], pad[j]);  // block prefix max
  for (int64_t j = np - 1; j >= 0; --j)
    h[j] = (j % w == w - 1 || j == np - 1) ? pad[j] : std::max(h[j + 1], pad[j]);  // block suffix max
  for (int64_t j = 0; j < n; ++j) y[j] = std::max(h[j], g[j + w - 1]);
  return y;
}

std::vector<int32_t> top_k_positions(const float* scores, int64_t n, int64_t k) {
  std::vector<int32_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  if (k >= n) return idx;
  if (k <= 0) return {};
  const auto better = [scores](int32_t a, int32_t b) {
    const float sa = rank_value(scores[a]), sb = rank_value(scores[b]);
    return sa > sb || (sa == sb && a < b);
  };
  std::nth_element(idx.begin(), idx.begin() + k, idx.end(), better);
  idx.resize(static_cast<size_t>(k));
  std::sort(idx.begin(), idx.end());
  return idx;
}

PressResult keep_all(int n_head_kv, int64_t n_tokens) {
  PressResult res;
  std::vector<int32_t> all(static_cast<size_t>(n_tokens));
  std::iota(all.begin(), all.end(), 0);
  res.kept.assign(static_cast<size_t>(n_head_kv), all);
  res.scores.assign(static_cast<size_t>(n_head_kv), std::vector<float>(static_cast<size_t>(n_tokens), kInf));
  return res;
}

void check_input(const PressInput& in, int64_t capacity, std::string_view press, bool uses_window, bool uses_all_q) {
  const auto fail = [&](const std::string& what) {
    throw Error(fmt::format("press {}, layer {}: {}", press, in.layer, what));
  };
  const int64_t L = in.n_tokens;
  if (L < 1 || L > std::numeric_limits<int32_t>::max()) fail(fmt::format("n_tokens = {} out of range", L));
  if (in.n_head < 1 || in.n_head_kv < 1 || in.n_head % in.n_head_kv != 0)
    fail(fmt::format("n_head_kv = {} must be >= 1 and divide n_head = {}", in.n_head_kv, in.n_head));
  if (in.head_dim < 1) fail(fmt::format("head_dim = {} must be >= 1", in.head_dim));
  if (in.n_compress_layers < 1 || in.compress_index < 0 || in.compress_index >= in.n_compress_layers)
    fail(fmt::format("compress_index = {} out of range for n_compress_layers = {}", in.compress_index,
                     in.n_compress_layers));
  if (static_cast<int64_t>(in.keys.size()) != in.n_head_kv)
    fail(fmt::format("{} key views for n_head_kv = {}", in.keys.size(), in.n_head_kv));
  for (size_t h = 0; h < in.keys.size(); ++h) {
    const RowsView& k = in.keys[h];
    if (k.data == nullptr || k.n != L || k.head_dim != in.head_dim)
      fail(fmt::format("keys[{}] has {} rows of {} (data {}), expected {} rows of {}", h, k.n, k.head_dim,
                       k.data ? "set" : "null", L, in.head_dim));
  }
  if (capacity < 1) fail(fmt::format("capacity = {} must be >= 1", capacity));
  if (uses_window && capacity < L) {
    if (in.window < 1 || in.window >= L) fail(fmt::format("window = {} must be in [1, n_tokens = {})", in.window, L));
    if (capacity < in.window) fail(fmt::format("capacity = {} is smaller than the window = {}", capacity, in.window));
    if (in.window_q == nullptr) fail("window_q is null");
  }
  if (uses_all_q && in.all_q == nullptr) fail("all_q is null (the press needs all prompt queries)");
  if (in.n_threads < 1) fail(fmt::format("n_threads = {} must be >= 1", in.n_threads));
}

HeadScores snapkv_scores(const PressInput& in, int kernel, PoolType pool, GQAAgg agg) {
  HeadScores kv = gqa_reduce(window_attention_scores(in, 0), in.n_head_kv, agg);  // steps 1-4
  for (auto& s : kv) s = pool1d(s, kernel, pool);                                 // step 5
  return kv;
}

std::vector<int64_t> pyramid_budgets(int64_t prefix_budget, int64_t max_prefix, double beta, int n_layers) {
  const int64_t P = prefix_budget;
  if (n_layers < 1) throw Error(fmt::format("pyramidkv: n_compress_layers = {} must be >= 1", n_layers));
  if (!(beta >= 1.0) || !std::isfinite(beta))
    throw Error(fmt::format("pyramidkv: pyramid_beta = {} must be >= 1", beta));
  if (P < 0 || P > max_prefix)
    throw Error(fmt::format("pyramidkv: prefix budget {} out of range [0, {}]", P, max_prefix));
  const int64_t mn = static_cast<int64_t>(std::floor(static_cast<double>(P) / beta));
  const int64_t mx = 2 * P - mn;
  if (n_layers == 1 || mx > max_prefix || mx == mn) return std::vector<int64_t>(static_cast<size_t>(n_layers), P);
  // budget(i) = (mx (n-1) - (mx - mn) i) / (n-1), exactly: floor + remainder.
  const int64_t den = n_layers - 1;
  std::vector<int64_t> out(static_cast<size_t>(n_layers)), rem(static_cast<size_t>(n_layers));
  int64_t total = 0;
  for (int i = 0; i < n_layers; ++i) {
    const int64_t num = mx * den - (mx - mn) * i;
    out[i] = num / den;
    rem[i] = num % den;
    total += out[i];
  }
  std::vector<int> order(static_cast<size_t>(n_layers));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return rem[a] > rem[b]; });
  const int64_t extra = static_cast<int64_t>(n_layers) * P - total;  // < n_layers
  for (int64_t t = 0; t < extra; ++t) ++out[order[static_cast<size_t>(t)]];
  return out;
}

std::vector<std::vector<int32_t>> adaptive_top_k(const HeadScores& scores, int64_t k, double alpha) {
  const size_t H = scores.size();
  const int64_t safe = std::min<int64_t>(k, static_cast<int64_t>(std::floor(alpha * static_cast<double>(k))));
  std::vector<std::vector<int32_t>> picks(H);
  std::vector<std::vector<char>> taken(H);
  // Safeguard: each head's own top `safe` positions.
  for (size_t h = 0; h < H; ++h) {
    const std::vector<float>& s = scores[h];
    picks[h] = top_k_positions(s.data(), static_cast<int64_t>(s.size()), safe);
    taken[h].assign(s.size(), 0);
    for (int32_t p : picks[h]) taken[h][static_cast<size_t>(p)] = 1;
  }
  // The rest: global top over all heads' remaining positions.
  struct Cand {
    float score;
    int32_t pos;
    int32_t head;
  };
  std::vector<Cand> cands;
  for (size_t h = 0; h < H; ++h)
    for (size_t j = 0; j < scores[h].size(); ++j)
      if (!taken[h][j]) cands.push_back({rank_value(scores[h][j]), static_cast<int32_t>(j), static_cast<int32_t>(h)});
  const int64_t want = std::min<int64_t>(static_cast<int64_t>(H) * (k - safe), static_cast<int64_t>(cands.size()));
  const auto better = [](const Cand& a, const Cand& b) {
    if (a.score != b.score) return a.score > b.score;
    if (a.pos != b.pos) return a.pos < b.pos;
    return a.head < b.head;
  };
  if (want < static_cast<int64_t>(cands.size()))
    std::nth_element(cands.begin(), cands.begin() + want, cands.end(), better);
  for (int64_t t = 0; t < want; ++t) picks[static_cast<size_t>(cands[t].head)].push_back(cands[t].pos);
  for (auto& p : picks) std::sort(p.begin(), p.end());
  return picks;
}

}  // namespace snapkv::press_detail
