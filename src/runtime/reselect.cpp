// snapkv runtime: re-selection of a compressed prompt's hot entries for a follow-up question, from
// the cold tier (issue 10; PrefillOptions::reselect, docs/follow-up.md).
#include "runtime/reselect.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>

#include "kv/presses/scoring.h"
#include "runtime/sequence_state.h"
#include "snapkv/error.h"

namespace snapkv {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

int64_t int_key(const PressSpec& s, const char* key, int64_t dflt) {
  const auto v = s.get(key);
  if (!v) return dflt;
  try {
    return std::stoll(*v);
  } catch (const std::exception&) {
    return dflt;
  }
}

}  // namespace

ReselectParams reselect_params(const std::string& canonical_spec, int64_t question_tokens) {
  ReselectParams p;
  const PressSpec s = PressSpec::parse(canonical_spec);
  // The spec is a press's canonical one (validated when it compressed, or by load_session); the
  // clamps keep a hand-made spec from indexing outside the score rows all the same.
  p.kernel = static_cast<int>(std::clamp<int64_t>(int_key(s, "kernel", 7), 1, 1 << 20));
  p.pool = s.get("pool").value_or("max") == "avg" ? PoolType::Avg : PoolType::Max;
  const std::string agg = s.get("gqa_agg").value_or("mean");
  p.agg = agg == "max" ? GQAAgg::Max : agg == "sum" ? GQAAgg::Sum : GQAAgg::Mean;
  p.sinks = std::max<int64_t>(0, int_key(s, "sinks", 0));
  const std::string w = s.get("window").value_or("32");
  int64_t W = 32;
  if (w == "question") {
    const int64_t lo = std::max<int64_t>(1, int_key(s, "window_min", 8));
    W = std::clamp<int64_t>(question_tokens, lo, std::max(lo, int_key(s, "window_max", 64)));
  } else {
    W = int_key(s, "window", 32);
  }
  p.window = static_cast<int>(std::clamp<int64_t>(W, 1, question_tokens));
  return p;
}

void Sequence::State::restore_layer(int il) {
  const auto t0 = Clock::now();
  KVLayerCache& layer = cache.layer(il);
  const int64_t L = cold->n_tokens(il);
  const auto hd = static_cast<size_t>(layer.heads.at(0).head_dim());
  std::vector<float> k(static_cast<size_t>(L) * hd), v(k.size()), row_k(hd), row_v(hd);
  std::vector<int32_t> pos(static_cast<size_t>(L));
  for (int64_t p = 0; p < L; ++p) pos[static_cast<size_t>(p)] = static_cast<int32_t>(p);
  job->reselect_keep.assign(layer.heads.size(), 0);
  for (size_t h = 0; h < layer.heads.size(); ++h) {
    KVHeadCache& hc = layer.heads[h];
    const auto hp = hc.positions();
    // Hot prompt entries come first (positions ascending, the prompt is 0..L-1).
    const auto n_hot =
        static_cast<int64_t>(std::lower_bound(hp.begin(), hp.end(), static_cast<int32_t>(L)) - hp.begin());
    job->reselect_keep[h] = n_hot;
    cold->read(il, static_cast<int>(h), 0, L, k.data(), v.data());
    for (int64_t i = 0; i < n_hot; ++i) {  // the hot rows as they are (exact)
      const auto p = static_cast<size_t>(hp[static_cast<size_t>(i)]);
      hc.key_row(i, k.data() + p * hd);
      hc.value_row(i, v.data() + p * hd);
    }
    KVHeadCache nh(hc.k_type(), hc.v_type(), hc.head_dim());
    nh.reserve(L + hc.size() - n_hot + job->n);
    nh.append(L, pos.data(), k.data(), static_cast<int64_t>(hd), v.data(), static_cast<int64_t>(hd));
    for (int64_t i = n_hot; i < hc.size(); ++i) {  // everything after the prompt stays as it is
      hc.key_row(i, row_k.data());
      hc.value_row(i, row_v.data());
      nh.append(1, hp.data() + i, row_k.data(), static_cast<int64_t>(hd), row_v.data(), static_cast<int64_t>(hd));
    }
    hc = std::move(nh);
  }
  stats.reselect_ms += ms_since(t0);
  sample_peak();
}

void Sequence::State::reselect_layer(int il, const float* window_q, int n_threads) {
  const auto t0 = Clock::now();
  KVLayerCache& layer = cache.layer(il);
  const int64_t L = cold->n_tokens(il);
  const int64_t N = layer.heads.at(0).size();  // prompt + later entries + this question
  const ReselectParams rp = reselect_params(stats.press, job->n);
  const int W = static_cast<int>(job->window);  // the queries begin_prefill sized window_q for
  const PressInput in = layer_input(il, N, W, window_q, n_threads);
  // Scores of entries 0..N-W-1 per KV head; only the prompt's (0..L-1) compete.
  const press_detail::HeadScores scores = press_detail::snapkv_scores(in, rp.kernel, rp.pool, rp.agg);
  KeptLayer kl;
  kl.layer = il;
  for (size_t h = 0; h < layer.heads.size(); ++h) {
    const int64_t keep = std::min(job->reselect_keep[h], L);
    const int64_t S = std::min(rp.sinks, keep);
    std::vector<int32_t> idx;
    idx.reserve(static_cast<size_t>(keep + N - L));
    for (int64_t p = 0; p < S; ++p) idx.push_back(static_cast<int32_t>(p));
    for (int32_t p : press_detail::top_k_positions(scores[h].data() + S, L - S, keep - S))
      idx.push_back(static_cast<int32_t>(p + S));
    for (int64_t p = L; p < N; ++p) idx.push_back(static_cast<int32_t>(p));
    if (opt.log_kept) {
      kl.positions.emplace_back(idx.begin(), idx.begin() + keep);
      std::vector<float> sc;
      for (int64_t i = 0; i < keep; ++i)
        sc.push_back(i < S ? std::numeric_limits<float>::infinity() : scores[h][static_cast<size_t>(idx[i])]);
      kl.scores.push_back(std::move(sc));
    }
    layer.heads[h].keep(idx);  // entry i of the restored layer has position i up to L
  }
  if (opt.log_kept) kept.push_back(std::move(kl));
  stats.reselect_ms += ms_since(t0);
  stats.reselect_window = W;
  sample_peak();
}

}  // namespace snapkv
