// Shared fixtures of the compression integration tests: the models (stories260K from ../shared,
// a synthetic Llama generated on the fly, Gemma 3 from the model cache), random prompts, snapshots
// of the KV cache, and two independent references written out naively in double precision:
//  - naive_attention(): attention of queries over exactly the (position, key, value) triples a
//    KVLayerCache holds (causal mask on the ORIGINAL positions, optional sliding window);
//  - naive_llama_decode(): one decode step of a Llama model rebuilt from the public building blocks
//    (Model::embed, rms_norm, matmul, rope_rows, Model::logits) over a snapshot of the cache.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "attention/attention.h"
#include "core/fp16.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "model/norm.h"
#include "model/rope.h"
#include "quant/quant.h"
#include "support/synthetic_model.h"
#include "support/test_session.h"
#include "support/threads.h"
#include "test_util.h"

namespace snapkv::ctest {

/// stories260K (real, F32 weights): llama, 5 layers, 8 query heads, 4 KV heads, head_dim 8, vocab 512.
inline std::shared_ptr<const Model> stories() {
  static std::shared_ptr<const Model> m = Model::load((test::shared_dir() / "models" / "stories260K.gguf").string());
  return m;
}

/// The synthetic model's shapes: 4 layers, 6 query heads / 2 KV heads (GQA 3:1), head_dim 16, context 4096.
inline SyntheticModelConfig synthetic_config() {
  SyntheticModelConfig c;
  c.n_layer = 4;
  c.n_head = 6;
  c.n_head_kv = 2;
  c.head_dim = 16;
  c.n_embd = 64;
  c.n_ff = 128;
  c.n_vocab = 512;
  c.n_ctx = 4096;
  c.rope_base = 10000.0f;
  c.weight_std = 0.15f;  // larger than a trained model's so attention is far from uniform
  c.seed = 20240417;
  c.name = "compression-test synthetic llama";
  return c;
}

/// The synthetic model, written to a temp file once per process and mapped; the file is unlinked
/// right after loading (the mapping stays valid), so nothing is left behind.
inline std::shared_ptr<const Model> synthetic() {
  static std::shared_ptr<const Model> m = [] {
    namespace fs = std::filesystem;
    const fs::path p = fs::temp_directory_path() / ("snapkv_compression_" + std::to_string(::getpid()) + ".gguf");
    write_synthetic_model(synthetic_config(), p.string());
    auto model = Model::load(p.string());
    fs::remove(p);
    return model;
  }();
  return m;
}

/// The synthetic shapes with weights so small (std 1e-20) that Q8_0's F16 block scales round to
/// zero: every weight, hence every query, key, value and attention score, is exactly 0 — all
/// scores tie in every layer.
inline std::shared_ptr<const Model> zero_synthetic() {
  static std::shared_ptr<const Model> m = [] {
    namespace fs = std::filesystem;
    const fs::path p = fs::temp_directory_path() / ("snapkv_compression_zero_" + std::to_string(::getpid()) + ".gguf");
    SyntheticModelConfig c = synthetic_config();
    c.weight_std = 1e-20f;
    write_synthetic_model(c, p.string());
    auto model = Model::load(p.string());
    fs::remove(p);
    return model;
  }();
  return m;
}

/// Gemma 3 270M from the model cache, or nullptr when absent.
inline std::shared_ptr<const Model> gemma() {
  static std::shared_ptr<const Model> m = [] {
    const auto p = test::gemma_path();
    return std::filesystem::exists(p) ? Model::load(p.string()) : std::shared_ptr<const Model>{};
  }();
  return m;
}

/// `n` token ids uniform in [3, n_vocab) (no BOS/EOS/UNK), fixed seed.
inline std::vector<int32_t> random_tokens(size_t n, int n_vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> d(3, n_vocab - 1);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = d(rng);
  return t;
}

/// TestSession options: press `name` with `budget` (0 = unset), window W, KV type, context n_ctx.
inline TestSessionOptions options(const std::string& name, int64_t budget, KVType kv = KVType::F32, int window = 32,
                                  int64_t n_ctx = 2048) {
  TestSessionOptions o;
  o.n_ctx = n_ctx;
  o.kv_type = kv;
  o.press.name = name;
  o.press.budget = budget;
  o.press.window = window;
  o.press.seed = 7;
  return o;
}

/// Every press make_press() accepts, "none" first.
inline const std::vector<std::string>& all_presses() {
  static const std::vector<std::string> p{"none", "snapkv", "pyramidkv", "adakv", "streamingllm",
                                          "h2o",  "tova",   "knorm",     "random"};
  return p;
}

/// Contents of one KV head as f32: positions, keys [n][hd], values [n][hd].
struct HeadSnapshot {
  std::vector<int32_t> pos;
  std::vector<float> k, v;
};
/// [layer][kv head].
using CacheSnapshot = std::vector<std::vector<HeadSnapshot>>;

/// Copies every entry of `cache` through the public accessors (positions(), key_row(), value_row()).
inline CacheSnapshot snapshot(const KVCache& cache) {
  CacheSnapshot s(static_cast<size_t>(cache.n_layer()));
  const int hd = cache.head_dim();
  for (int il = 0; il < cache.n_layer(); ++il) {
    for (const KVHeadCache& h : cache.layer(il).heads) {
      HeadSnapshot hs;
      hs.pos.assign(h.positions().begin(), h.positions().end());
      hs.k.resize(static_cast<size_t>(h.size()) * hd);
      hs.v.resize(hs.k.size());
      for (int64_t i = 0; i < h.size(); ++i) {
        h.key_row(i, hs.k.data() + i * hd);
        h.value_row(i, hs.v.data() + i * hd);
      }
      s[static_cast<size_t>(il)].push_back(std::move(hs));
    }
  }
  return s;
}

/// Bytes the cache must hold by the documented formula: entries x (key row + value row bytes).
inline size_t formula_bytes(const KVCache& c) {
  size_t entries = 0;
  for (int il = 0; il < c.n_layer(); ++il)
    for (const auto& h : c.layer(il).heads) entries += static_cast<size_t>(h.size());
  return entries * kv_entry_bytes(c.k_type(), c.v_type(), c.head_dim());
}

/// Rounds through IEEE half (what an F16 cache / ggml's F16 mat-mul operand does to a float).
inline float round_f16(float x) { return fp16_to_fp32(fp32_to_fp16(x)); }

/// Naive attention of one query vector per query head at position `qpos` over the triples of one
/// layer's snapshot plus optional extra triples (the new token's own K/V, appended at qpos):
/// out_h = sum_j softmax_j(scale * q_h . k_j) v_j over entries j of KV head h / G with
/// pos_j <= qpos (and qpos - pos_j < window when window > 0), computed in double.
/// `f16` mimics the documented F16-cache arithmetic of attention/attention.h: the query is rounded
/// to F16 (F16Semantics::Decode, the split-K decode kernel), and for F16Semantics::Prefill the
/// normalized probabilities are rounded to F16 before the V product too (the prefill kernel).
enum class F16Semantics { None, Decode, Prefill };
inline void naive_attention(const AttentionParams& p, const float* q, int32_t qpos,
                            const std::vector<HeadSnapshot>& layer, const float* extra_k, const float* extra_v,
                            F16Semantics f16, float* out) {
  const int G = p.n_head / p.n_head_kv;
  const int hd = p.head_dim;
  for (int h = 0; h < p.n_head; ++h) {
    const int g = h / G;
    const HeadSnapshot& hs = layer[static_cast<size_t>(g)];
    std::vector<float> qh(q + static_cast<size_t>(h) * hd, q + static_cast<size_t>(h + 1) * hd);
    if (f16 != F16Semantics::None)
      for (auto& x : qh) x = round_f16(x);
    std::vector<const float*> ks, vs;
    for (size_t j = 0; j < hs.pos.size(); ++j) {
      const int64_t kp = hs.pos[j];
      if (kp > qpos || (p.window > 0 && qpos - kp >= p.window)) continue;
      ks.push_back(hs.k.data() + j * hd);
      vs.push_back(hs.v.data() + j * hd);
    }
    if (extra_k) {
      ks.push_back(extra_k + static_cast<size_t>(g) * hd);
      vs.push_back(extra_v + static_cast<size_t>(g) * hd);
    }
    float* o = out + static_cast<size_t>(h) * hd;
    std::fill(o, o + hd, 0.0f);
    if (ks.empty()) continue;
    std::vector<double> s(ks.size());
    double mx = -INFINITY;
    for (size_t j = 0; j < ks.size(); ++j) {
      double d = 0;
      for (int i = 0; i < hd; ++i) d += static_cast<double>(qh[static_cast<size_t>(i)]) * ks[j][i];
      s[j] = static_cast<double>(p.scale) * d;
      mx = std::max(mx, s[j]);
    }
    double sum = 0;
    for (auto& x : s) sum += (x = std::exp(x - mx));
    std::vector<double> acc(static_cast<size_t>(hd), 0.0);
    for (size_t j = 0; j < ks.size(); ++j) {
      double pr = s[j] / sum;
      if (f16 == F16Semantics::Prefill) pr = round_f16(static_cast<float>(pr));
      for (int i = 0; i < hd; ++i) acc[static_cast<size_t>(i)] += pr * vs[j][i];
    }
    for (int i = 0; i < hd; ++i) o[i] = static_cast<float>(acc[static_cast<size_t>(i)]);
  }
}

/// One decode step of a `llama` model for `token` at position `pos`, rebuilt from the public
/// building blocks, attending over exactly the triples of `cache` (a snapshot taken before the
/// step) plus the token's own key/value. `kv` = the session's cache type: with F16 the new K/V
/// are rounded to F16 (as the cache stores them) and naive_attention() uses the decode kernel's
/// F16 semantics.
/// Returns the logits [n_vocab].
inline std::vector<float> naive_llama_decode(const Model& m, const CacheSnapshot& cache, int32_t token, int32_t pos,
                                             KVType kv) {
  const ModelConfig& c = m.config();
  EXPECT_EQ(c.arch, "llama");
  const int hd = c.head_dim;
  const int64_t E = c.n_embd, qd = int64_t{c.n_head} * hd, kd = int64_t{c.n_head_kv} * hd;
  std::vector<float> h(static_cast<size_t>(E)), x(h.size()), q(static_cast<size_t>(qd)), k(static_cast<size_t>(kd)),
      v(k.size()), att(q.size()), a(static_cast<size_t>(c.n_ff)), b(a.size());
  m.embed({&token, 1}, h.data());
  for (int il = 0; il < c.n_layer; ++il) {
    const LayerWeights& L = m.layer(il);
    rms_norm(h.data(), L.attn_norm.data(), x.data(), E, c.rms_eps);
    matmul(L.wq, x.data(), 1, q.data(), test::threads());
    matmul(L.wk, x.data(), 1, k.data(), test::threads());
    matmul(L.wv, x.data(), 1, v.data(), test::threads());
    const RopeParams rp = m.rope_params(il);
    rope_rows(rp, &pos, 1, q.data(), qd, c.n_head, 2);
    rope_rows(rp, &pos, 1, k.data(), kd, c.n_head_kv, 2);
    if (kv == KVType::F16) {
      for (auto& e : k) e = round_f16(e);
      for (auto& e : v) e = round_f16(e);
    }
    naive_attention(m.attention_params(il), q.data(), pos, cache[static_cast<size_t>(il)], k.data(), v.data(),
                    kv == KVType::F16 ? F16Semantics::Decode : F16Semantics::None, att.data());
    matmul(L.wo, att.data(), 1, x.data(), test::threads());
    for (int64_t i = 0; i < E; ++i) h[static_cast<size_t>(i)] += x[static_cast<size_t>(i)];
    rms_norm(h.data(), L.ffn_norm.data(), x.data(), E, c.rms_eps);
    matmul(L.ffn_gate, x.data(), 1, a.data(), test::threads());
    matmul(L.ffn_up, x.data(), 1, b.data(), test::threads());
    swiglu_inplace(a.data(), b.data(), c.n_ff, 2);
    matmul(L.ffn_down, a.data(), 1, x.data(), test::threads());
    for (int64_t i = 0; i < E; ++i) h[static_cast<size_t>(i)] += x[static_cast<size_t>(i)];
  }
  std::vector<float> logits(static_cast<size_t>(c.n_vocab)), tmp(static_cast<size_t>(E));
  m.logits(h.data(), 1, logits.data(), tmp.data(), test::threads());
  return logits;
}

/// max_i |a_i - b_i| / max(1, max_i |b_i|): the error relative to the reference's scale.
inline double rel_err(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  double md = 0, mb = 1;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    md = std::max(md, std::abs(static_cast<double>(a[i]) - b[i]));
    mb = std::max(mb, std::abs(static_cast<double>(b[i])));
  }
  return md / mb;
}

inline int32_t argmax(std::span<const float> v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

}  // namespace snapkv::ctest
