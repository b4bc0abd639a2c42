// snapkv tests: random ragged per-head KV caches with queries, and naive attention in double over
// them, shared by the attention kernel tests (tests/model/test_attention.cpp,
// tests/attention/test_prefill_bf16.cpp, tests/attention/test_prefill_int8.cpp). Header-only: the tests reach internal
// headers, the support library does not.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <random>
#include <vector>

#include "attention/attention.h"
#include "attention/decode_q8_keys.h"
#include "core/fp16.h"
#include "kv/kv_cache.h"
#include "quant/act_quant.h"

namespace snapkv::test {

/// One attention problem: shape, queries and a ragged cache.
struct AttnCase {
  int n_head, n_head_kv, head_dim;
  int64_t n_q;    ///< queries, at the last n_q positions (1 = the decode kernel)
  int64_t n_pos;  ///< cache positions are drawn from [0, n_pos); the last one is always stored
  int window;     ///< sliding window; 0 = full causal
  KVType type;
  double keep_prob;  ///< probability that a position is stored in a head (ragged heads)
};

inline void PrintTo(const AttnCase& c, std::ostream* os) {
  *os << "n_head " << c.n_head << " n_head_kv " << c.n_head_kv << " head_dim " << c.head_dim << " n_q " << c.n_q
      << " n_pos " << c.n_pos << " window " << c.window << " " << kv_type_name(c.type) << " keep " << c.keep_prob;
}

inline AttentionParams attention_params(const AttnCase& c) {
  return AttentionParams{c.n_head, c.n_head_kv, c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim)), c.window};
}

/// The cache (keys ~ N(0, 4): scores spread over several units; values ~ N(0, 1)), the queries
/// [n_q][n_head][head_dim] ~ N(0, 1) and their positions (ascending, as in a prefill chunk).
struct AttnInputs {
  KVLayerCache cache;
  std::vector<float> q;
  std::vector<int32_t> qpos;
};

inline AttnInputs make_attention_inputs(const AttnCase& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<double> ud(0.0, 1.0);
  AttnInputs b;
  b.cache.window = c.window;
  for (int g = 0; g < c.n_head_kv; ++g) {
    KVHeadCache h(c.type, c.head_dim);
    std::vector<int32_t> pos;
    for (int32_t p = 0; p < c.n_pos; ++p)
      if (ud(rng) < c.keep_prob || p == c.n_pos - 1) pos.push_back(p);
    std::vector<float> k(pos.size() * static_cast<size_t>(c.head_dim)), v(k.size());
    for (auto& x : k) x = nd(rng) * 2.0f;
    for (auto& x : v) x = nd(rng);
    h.append(static_cast<int64_t>(pos.size()), pos.data(), k.data(), c.head_dim, v.data(), c.head_dim);
    b.cache.heads.push_back(std::move(h));
  }
  b.q.resize(static_cast<size_t>(c.n_q * c.n_head * c.head_dim));
  for (auto& x : b.q) x = nd(rng);
  for (int64_t t = 0; t < c.n_q; ++t) b.qpos.push_back(static_cast<int32_t>(c.n_pos - c.n_q + t));
  return b;
}

/// x rounded to the nearest bfloat16 (ties to even), as f32.
inline float round_bf16(float x) {
  const uint32_t u = uint32_t{quant::fp32_to_bf16(x)} << 16;
  std::memcpy(&x, &u, 4);
  return x;
}

/// What the reference rounds before its double arithmetic.
enum class RefRounding {
  Kernel,  ///< as the exact kernels: the query rounded to F16 for an F16 cache (ggml's rounding)
  BF16,    ///< as the BF16 prefill kernel: the pre-scaled query, the keys and the values to bfloat16
};

/// Naive attention in double over the cache's stored rows (read as f32: Q8_0 rows dequantized);
/// for one query (the decode kernel) over Q8_0 keys, with the query rounded to int16 as that
/// kernel does where it takes its int16 path (attn::query_i16_values).
/// Returns [n_q][n_head][head_dim]; zeros for a query without a visible key.
inline std::vector<double> naive_attention(const AttnCase& c, const AttnInputs& b, float scale,
                                           RefRounding rounding = RefRounding::Kernel) {
  const int G = c.n_head / c.n_head_kv, hd = c.head_dim;
  const bool bf16 = rounding == RefRounding::BF16;
  std::vector<double> out(static_cast<size_t>(c.n_q * c.n_head * hd), 0.0);
  std::vector<float> row(static_cast<size_t>(hd));
  auto rv = [&](float x) { return bf16 ? round_bf16(x) : x; };
  auto rq = [&](float x) {
    if (bf16) return round_bf16(x * scale);
    return c.type == KVType::F16 ? fp16_to_fp32(fp32_to_fp16(x)) : x;
  };
  for (int64_t t = 0; t < c.n_q; ++t) {
    for (int h = 0; h < c.n_head; ++h) {
      const KVHeadCache& hc = b.cache.heads[static_cast<size_t>(h / G)];
      const float* q = b.q.data() + (t * c.n_head + h) * hd;
      // The decode kernel's int16 query over Q8_0 keys (attention/decode_q8_keys.h).
      std::vector<float> q_i16(static_cast<size_t>(hd));
      if (!bf16 && c.n_q == 1 && hc.k_type() == KVType::Q8_0 && attn::query_i16_values(q, hd, q_i16.data()))
        q = q_i16.data();
      const int64_t qp = b.qpos[static_cast<size_t>(t)];
      std::vector<double> s;
      std::vector<int64_t> idx;
      for (int64_t j = 0; j < hc.size(); ++j) {
        const int64_t kp = hc.positions()[static_cast<size_t>(j)];
        if (kp > qp || (c.window > 0 && qp - kp >= c.window)) continue;
        hc.key_row(j, row.data());
        double d = 0;
        for (int i = 0; i < hd; ++i) d += static_cast<double>(rq(q[i])) * rv(row[static_cast<size_t>(i)]);
        s.push_back(bf16 ? d : scale * d);
        idx.push_back(j);
      }
      if (s.empty()) continue;
      const double mx = *std::max_element(s.begin(), s.end());
      double sum = 0;
      for (auto& x : s) sum += (x = std::exp(x - mx));
      double* o = out.data() + (t * c.n_head + h) * hd;
      for (size_t j = 0; j < s.size(); ++j) {
        hc.value_row(idx[j], row.data());
        for (int i = 0; i < hd; ++i) o[i] += s[j] / sum * rv(row[static_cast<size_t>(i)]);
      }
    }
  }
  return out;
}

/// Two F16 heads of 64 dims with keys at positions 0..n-1: head 0 has 64 keys whose values in keys
/// 6..63 are infinite, head 1 has 5 keys (random, seed 11); two queries of 2 heads at positions 62
/// and 63 (attention_params: AttentionParams{2, 2, 64, 0.125f, 0}). Head 1's outputs must be
/// finite: a kernel must not read head 0's values past head 1's last key.
inline AttnInputs make_stale_values_case() {
  AttnInputs b;
  std::mt19937_64 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int g = 0; g < 2; ++g) {
    const int n = g == 0 ? 64 : 5;
    KVHeadCache h(KVType::F16, 64);
    std::vector<int32_t> pos(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) pos[static_cast<size_t>(i)] = i;
    std::vector<float> k(static_cast<size_t>(n) * 64), v(k.size());
    for (auto& x : k) x = nd(rng);
    for (size_t i = 0; i < v.size(); ++i) v[i] = g == 0 && i >= 6 * 64 ? INFINITY : nd(rng);
    h.append(n, pos.data(), k.data(), 64, v.data(), 64);
    b.cache.heads.push_back(std::move(h));
  }
  b.qpos = {62, 63};
  b.q.resize(b.qpos.size() * 2 * 64);
  for (auto& x : b.q) x = nd(rng);
  return b;
}

/// make_stale_values_case() run with prefill attention `a` and with Exact (1 thread): the largest
/// |out - exact| over head 1's outputs, infinity where one of them is not finite.
inline double stale_values_head1_worst(PrefillAttention a) {
  const AttentionParams p{2, 2, 64, 0.125f, 0};
  const AttnInputs b = make_stale_values_case();
  AttentionWorkspace ws(p, 2, a), exact_ws(p, 2);
  std::vector<float> out(b.q.size()), exact(b.q.size());
  attention(p, b.q.data(), b.qpos.data(), 2, b.cache, out.data(), ws, 1);
  attention(p, b.q.data(), b.qpos.data(), 2, b.cache, exact.data(), exact_ws, 1);
  double worst = 0;
  for (size_t t = 0; t < 2; ++t)
    for (size_t d = 0; d < 64; ++d) {
      const size_t i = (t * 2 + 1) * 64 + d;  // head 1
      if (!std::isfinite(out[i])) return INFINITY;
      worst = std::max(worst, std::fabs(double{out[i]} - exact[i]));
    }
  return worst;
}

}  // namespace snapkv::test
