// Shared fixtures of the press tests: random layers (queries, f32/f16 keys) and a
// double-precision reference of the scoring steps, written out explicitly.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "core/fp16.h"
#include "kv/presses/press.h"
#include "snapkv/error.h"

namespace snapkv::test {

/// One synthetic layer: n_head query heads, n_head_kv KV heads, L prompt tokens, window W.
struct Layer {
  int64_t L = 0;
  int n_head = 0, n_head_kv = 0, head_dim = 0, W = 0;
  float scale = 1.0f;
  bool f16 = false;
  std::vector<float> all_q;      // [n_head][L][d]
  std::vector<float> window_q;   // [n_head][W][d] = the last W rows of all_q
  std::vector<float> keys;       // [n_head_kv][L][d] (f16-rounded when f16)
  std::vector<uint16_t> keys16;  // same as f16
  std::vector<float> values;     // [n_head_kv][L][d]

  /// Random N(0, q_std) queries and N(0, 1) keys.
  static Layer random(int64_t L, int n_head, int n_head_kv, int d, int W, bool f16, uint64_t seed, float q_std = 1.0f) {
    Layer l;
    l.L = L, l.n_head = n_head, l.n_head_kv = n_head_kv, l.head_dim = d, l.W = W, l.f16 = f16;
    l.scale = 1.0f / std::sqrt(static_cast<float>(d));
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> nq(0.0f, q_std), nk(0.0f, 1.0f);
    l.all_q.resize(static_cast<size_t>(n_head * L * d));
    for (auto& x : l.all_q) x = nq(rng);
    l.keys.resize(static_cast<size_t>(n_head_kv * L * d));
    for (auto& x : l.keys) x = nk(rng);
    l.values = l.keys;
    l.finish();
    return l;
  }

  /// Every query and key zero: every attention score is equal.
  static Layer zeros(int64_t L, int n_head, int n_head_kv, int d, int W, bool f16) {
    Layer l;
    l.L = L, l.n_head = n_head, l.n_head_kv = n_head_kv, l.head_dim = d, l.W = W, l.f16 = f16;
    l.scale = 1.0f / std::sqrt(static_cast<float>(d));
    l.all_q.assign(static_cast<size_t>(n_head * L * d), 0.0f);
    l.keys.assign(static_cast<size_t>(n_head_kv * L * d), 0.0f);
    l.values = l.keys;
    l.finish();
    return l;
  }

  /// Derives window_q and the f16 keys (rounding `keys` to what the f16 cache holds).
  void finish() {
    window_q.resize(static_cast<size_t>(n_head * W * head_dim));
    for (int h = 0; h < n_head; ++h)
      std::copy_n(all_q.begin() + (h * L + L - W) * head_dim, W * head_dim, window_q.begin() + h * W * head_dim);
    keys16.resize(keys.size());
    if (f16) {
      for (size_t i = 0; i < keys.size(); ++i) {
        keys16[i] = fp32_to_fp16(keys[i]);
        keys[i] = fp16_to_fp32(keys16[i]);
      }
    }
  }

  const float* key(int kv, int64_t j) const { return keys.data() + (kv * L + j) * head_dim; }
  const float* query(int h, int64_t i) const { return all_q.data() + (h * L + i) * head_dim; }

  PressInput input(int compress_index = 0, int n_compress_layers = 1, int layer = 0) const {
    PressInput in;
    in.layer = layer;
    in.compress_index = compress_index;
    in.n_compress_layers = n_compress_layers;
    in.n_tokens = L;
    in.n_head = n_head;
    in.n_head_kv = n_head_kv;
    in.head_dim = head_dim;
    in.attn_scale = scale;
    in.window = W;
    in.window_q = window_q.data();
    in.all_q = all_q.data();
    for (int kv = 0; kv < n_head_kv; ++kv) {
      RowsView k;
      k.type = f16 ? KVType::F16 : KVType::F32;
      k.data = f16 ? static_cast<const void*>(keys16.data() + kv * L * head_dim)
                   : static_cast<const void*>(keys.data() + kv * L * head_dim);
      k.n = L;
      k.head_dim = head_dim;
      in.keys.push_back(k);
      RowsView v = k;
      v.type = KVType::F32;
      v.data = values.data() + kv * L * head_dim;
      in.values.push_back(v);
    }
    return in;
  }
};

using DScores = std::vector<std::vector<double>>;

/// Reference: softmax of query (h, position pos) over keys 0..pos, in double.
inline std::vector<double> ref_softmax_row(const Layer& l, const float* q, int kv, int64_t pos) {
  std::vector<double> logit(static_cast<size_t>(pos + 1));
  for (int64_t j = 0; j <= pos; ++j) {
    double dot = 0.0;
    for (int i = 0; i < l.head_dim; ++i) dot += static_cast<double>(q[i]) * l.key(kv, j)[i];
    logit[j] = static_cast<double>(l.scale) * dot;
  }
  const double mx = *std::max_element(logit.begin(), logit.end());
  double sum = 0.0;
  for (double& x : logit) sum += (x = std::exp(x - mx));
  for (double& x : logit) x /= sum;
  return logit;
}

/// Reference SnapKV steps 1-3: per query head, probabilities of the window rows first_row..W-1
/// summed over those rows, prefix positions 0..L-W-1.
inline DScores ref_window_scores(const Layer& l, int first_row = 0) {
  const int64_t P = l.L - l.W;
  const int group = l.n_head / l.n_head_kv;
  DScores out(static_cast<size_t>(l.n_head), std::vector<double>(static_cast<size_t>(P), 0.0));
  for (int h = 0; h < l.n_head; ++h)
    for (int i = first_row; i < l.W; ++i) {
      const int64_t pos = l.L - l.W + i;
      const std::vector<double> p = ref_softmax_row(l, l.query(h, pos), h / group, pos);
      for (int64_t j = 0; j < P; ++j) out[h][j] += p[j];
    }
  return out;
}

/// Reference H2O scores: sum over queries i >= j of softmax_i(j), divided by L - j (all j).
inline DScores ref_h2o_scores(const Layer& l) {
  const int group = l.n_head / l.n_head_kv;
  DScores out(static_cast<size_t>(l.n_head), std::vector<double>(static_cast<size_t>(l.L), 0.0));
  for (int h = 0; h < l.n_head; ++h) {
    for (int64_t i = 0; i < l.L; ++i) {
      const std::vector<double> p = ref_softmax_row(l, l.query(h, i), h / group, i);
      for (int64_t j = 0; j <= i; ++j) out[h][j] += p[j];
    }
    for (int64_t j = 0; j < l.L; ++j) out[h][j] /= static_cast<double>(l.L - j);
  }
  return out;
}

/// Reference GQA reduction: mean / max / sum over the query heads of each KV head.
inline DScores ref_gqa(const DScores& q, int n_head_kv, GQAAgg agg) {
  const int group = static_cast<int>(q.size()) / n_head_kv;
  DScores out(static_cast<size_t>(n_head_kv), std::vector<double>(q[0].size()));
  for (int kv = 0; kv < n_head_kv; ++kv)
    for (size_t j = 0; j < q[0].size(); ++j) {
      double acc = agg == GQAAgg::Max ? -std::numeric_limits<double>::infinity() : 0.0;
      for (int g = 0; g < group; ++g) {
        const double x = q[kv * group + g][j];
        acc = agg == GQAAgg::Max ? std::max(acc, x) : acc + x;
      }
      out[kv][j] = agg == GQAAgg::Mean ? acc / group : acc;
    }
  return out;
}

/// Reference pooling: window [j - K/2, j + K/2] clipped to the sequence; max over it, or its
/// sum divided by K (count_include_pad).
inline std::vector<double> ref_pool(const std::vector<double>& x, int K, PoolType type) {
  const int64_t n = static_cast<int64_t>(x.size()), h = K / 2;
  std::vector<double> y(x.size());
  for (int64_t j = 0; j < n; ++j) {
    double mx = -std::numeric_limits<double>::infinity(), sum = 0.0;
    for (int64_t t = j - h; t <= j + h; ++t) {
      if (t < 0 || t >= n) continue;
      mx = std::max(mx, x[t]);
      sum += x[t];
    }
    y[j] = type == PoolType::Max ? mx : sum / K;
  }
  return y;
}

/// Reference top-k: higher score first, earlier position on ties; ascending result.
inline std::vector<int32_t> ref_top_k(const std::vector<double>& s, int64_t k) {
  std::vector<int32_t> idx(s.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return s[a] > s[b]; });
  idx.resize(static_cast<size_t>(k));
  std::sort(idx.begin(), idx.end());
  return idx;
}

/// Checks picks (the kept prefix positions of one head) against the reference scores `ref`:
/// identical to the reference top-k when the k-th best reference score is separated from its
/// distinct neighbours by more than the relative tolerance; otherwise (a near tie of different
/// values) every pick scores >= and every non-pick <= the k-th best within the tolerance.
inline void expect_selection_matches(const std::vector<int32_t>& picks, const std::vector<double>& ref, int64_t k,
                                     double rel_tol, const std::string& what) {
  ASSERT_EQ(static_cast<int64_t>(picks.size()), k) << what;
  if (k == 0) return;
  std::vector<double> sorted = ref;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  const double vk = sorted[static_cast<size_t>(k - 1)];
  const double tol = rel_tol * std::max(std::abs(vk), 1e-30);
  bool near_tie = false;
  for (double v : ref)
    if (v != vk && std::abs(v - vk) <= 4 * tol) near_tie = true;
  if (!near_tie) {
    EXPECT_EQ(picks, ref_top_k(ref, k)) << what << ": selection differs from the reference";
    return;
  }
  std::vector<char> picked(ref.size(), 0);
  for (int32_t p : picks) picked[static_cast<size_t>(p)] = 1;
  for (size_t j = 0; j < ref.size(); ++j) {
    if (picked[j]) {
      EXPECT_GE(ref[j], vk - 4 * tol) << what << ": picked position " << j;
    } else {
      EXPECT_LE(ref[j], vk + 4 * tol) << what << ": skipped position " << j;
    }
  }
}

/// Structural properties every kept list must have: ascending, unique, in [0, L), scores of
/// the same length, and the positions in `must_keep` present with score +inf.
inline void expect_well_formed(const PressResult& r, int n_head_kv, int64_t L, const std::vector<int32_t>& must_keep,
                               const std::string& what) {
  ASSERT_EQ(static_cast<int>(r.kept.size()), n_head_kv) << what;
  ASSERT_EQ(r.scores.size(), r.kept.size()) << what;
  for (int h = 0; h < n_head_kv; ++h) {
    const auto& k = r.kept[h];
    ASSERT_EQ(r.scores[h].size(), k.size()) << what << " head " << h;
    for (size_t i = 0; i < k.size(); ++i) {
      ASSERT_GE(k[i], 0) << what;
      ASSERT_LT(k[i], L) << what;
      if (i > 0) {
        ASSERT_LT(k[i - 1], k[i]) << what << " head " << h << ": not ascending/unique at " << i;
      }
    }
    for (int32_t m : must_keep) {
      const auto it = std::lower_bound(k.begin(), k.end(), m);
      ASSERT_TRUE(it != k.end() && *it == m) << what << " head " << h << ": position " << m << " not kept";
      EXPECT_EQ(r.scores[h][static_cast<size_t>(it - k.begin())], std::numeric_limits<float>::infinity())
          << what << " head " << h << ": position " << m;
    }
  }
}

/// Positions first..last-1.
inline std::vector<int32_t> range(int64_t first, int64_t last) {
  std::vector<int32_t> r;
  for (int64_t j = first; j < last; ++j) r.push_back(static_cast<int32_t>(j));
  return r;
}

}  // namespace snapkv::test
