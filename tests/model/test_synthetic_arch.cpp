// Tiny synthetic GGUF models (F32 weights, so the mat-muls are plain f32) for both architectures,
// run through the engine and through a naive double-precision transformer written here from the
// architecture definitions; plus Model::load error handling on broken files.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <random>

#include "core/fp16.h"
#include "model/model.h"
#include "snapkv/error.h"
#include "support/gguf_writer.h"
#include "support/test_session.h"

namespace snapkv {
namespace {

struct Spec {
  std::string arch = "llama";
  int n_layer = 2, n_embd = 32, n_head = 4, n_head_kv = 2, head_dim = 8, n_ff = 48, n_vocab = 40;
  int n_rot = 8;
  int window = 0;           // gemma3 sliding window
  bool tied = false;        // no output.weight
  bool rope_freqs = false;  // llama: rope_freqs.weight
  float rope_scale = 1.0f;  // llama: linear rope scaling factor (1 = none)
  float rope_base = 10000.0f;
};

using Weights = std::map<std::string, std::vector<float>>;

struct Built {
  GGUFWriter w;
  Weights wt;
};

// Builds the file; `skip_key` / `skip_tensor` leave one out, `mutate` may edit the writer inputs.
Built build(const Spec& s, const std::string& skip_key = "", const std::string& skip_tensor = "") {
  Built b;
  std::mt19937_64 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const std::string a = s.arch;
  auto key_u32 = [&](const std::string& k, uint32_t v) {
    if (k != skip_key) b.w.add_u32(k, v);
  };
  auto key_f32 = [&](const std::string& k, float v) {
    if (k != skip_key) b.w.add_f32(k, v);
  };
  if (skip_key != "general.architecture") b.w.add_string("general.architecture", a);
  b.w.add_string("general.name", "tiny " + a);
  key_u32(a + ".context_length", 64);
  key_u32(a + ".embedding_length", static_cast<uint32_t>(s.n_embd));
  key_u32(a + ".block_count", static_cast<uint32_t>(s.n_layer));
  key_u32(a + ".feed_forward_length", static_cast<uint32_t>(s.n_ff));
  key_u32(a + ".attention.head_count", static_cast<uint32_t>(s.n_head));
  key_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
  key_u32(a + ".attention.key_length", static_cast<uint32_t>(s.head_dim));
  key_u32(a + ".attention.value_length", static_cast<uint32_t>(s.head_dim));
  key_u32(a + ".rope.dimension_count", static_cast<uint32_t>(s.n_rot));
  key_f32(a + ".attention.layer_norm_rms_epsilon", 1e-6f);
  key_f32(a + ".rope.freq_base", s.rope_base);
  if (s.window > 0) key_u32(a + ".attention.sliding_window", static_cast<uint32_t>(s.window));
  if (s.rope_scale != 1.0f) {
    b.w.add_string(a + ".rope.scaling.type", "linear");
    key_f32(a + ".rope.scaling.factor", s.rope_scale);
  }
  auto tensor = [&](const std::string& name, int64_t rows, int64_t cols, float sd, float mean = 0.0f) {
    std::vector<float> v(static_cast<size_t>(rows * cols));
    for (auto& x : v) x = mean + sd * nd(rng);
    if (name != skip_tensor) {
      std::vector<int64_t> dims = rows == 1 ? std::vector<int64_t>{cols} : std::vector<int64_t>{cols, rows};
      b.w.add_tensor_f32(name, dims, v);
    }
    b.wt[name] = std::move(v);
  };
  const int E = s.n_embd, qd = s.n_head * s.head_dim, kvd = s.n_head_kv * s.head_dim;
  tensor("token_embd.weight", s.n_vocab, E, a == "gemma3" ? 0.05f : 1.0f);
  tensor("output_norm.weight", 1, E, 0.1f, 1.0f);
  if (!s.tied) tensor("output.weight", s.n_vocab, E, 0.3f);
  if (s.rope_freqs) {
    std::vector<float> f(static_cast<size_t>(s.n_rot / 2));
    for (size_t i = 0; i < f.size(); ++i) f[i] = 1.0f + static_cast<float>(i);
    b.w.add_tensor_f32("rope_freqs.weight", {static_cast<int64_t>(f.size())}, f);
    b.wt["rope_freqs.weight"] = f;
  }
  const float sd_in = 1.0f / std::sqrt(static_cast<float>(E));
  for (int il = 0; il < s.n_layer; ++il) {
    const std::string p = fmt::format("blk.{}.", il);
    tensor(p + "attn_norm.weight", 1, E, 0.1f, 1.0f);
    tensor(p + "attn_q.weight", qd, E, 2.0f * sd_in);
    tensor(p + "attn_k.weight", kvd, E, 2.0f * sd_in);
    tensor(p + "attn_v.weight", kvd, E, sd_in);
    tensor(p + "attn_output.weight", E, qd, 1.0f / std::sqrt(static_cast<float>(qd)));
    tensor(p + "ffn_norm.weight", 1, E, 0.1f, 1.0f);
    tensor(p + "ffn_gate.weight", s.n_ff, E, sd_in);
    tensor(p + "ffn_up.weight", s.n_ff, E, sd_in);
    tensor(p + "ffn_down.weight", E, s.n_ff, 1.0f / std::sqrt(static_cast<float>(s.n_ff)));
    if (a == "gemma3") {
      tensor(p + "attn_q_norm.weight", 1, s.head_dim, 0.1f, 1.0f);
      tensor(p + "attn_k_norm.weight", 1, s.head_dim, 0.1f, 1.0f);
      tensor(p + "post_attention_norm.weight", 1, E, 0.1f, 1.0f);
      tensor(p + "post_ffw_norm.weight", 1, E, 0.1f, 1.0f);
    }
  }
  return b;
}

std::string write_tmp(const GGUFWriter& w, const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / "snapkv_test_model";
  std::filesystem::create_directories(dir);
  const auto path = (dir / (name + ".gguf")).string();
  w.write(path);
  return path;
}

// ---- naive reference transformer (double) ----
using Vec = std::vector<double>;

Vec rmsnorm(const Vec& x, const std::vector<float>& w, double eps) {
  double ss = 0;
  for (const double v : x) ss += v * v;
  const double sc = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * sc * w[i];
  return y;
}

Vec matvec(const std::vector<float>& W, int rows, int cols, const Vec& x) {
  Vec y(static_cast<size_t>(rows), 0.0);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      y[static_cast<size_t>(r)] += W[static_cast<size_t>(r * cols + c)] * x[static_cast<size_t>(c)];
  return y;
}

// RoFormer rotation of one head vector at position pos.
void rope(double* v, int hd, int n_rot, bool neox, double base, double scale, const std::vector<float>* ff, int pos) {
  for (int i = 0; i < n_rot / 2; ++i) {
    double th = pos * scale * std::pow(base, -2.0 * i / n_rot);
    if (ff) th /= (*ff)[static_cast<size_t>(i)];
    const int a = neox ? i : 2 * i, b = neox ? i + n_rot / 2 : 2 * i + 1;
    const double x0 = v[a], x1 = v[b];
    v[a] = x0 * std::cos(th) - x1 * std::sin(th);
    v[b] = x0 * std::sin(th) + x1 * std::cos(th);
  }
  (void)hd;
}

double gelu_f16_table(double x) {  // the engine's documented GELU: F16 in, F16 out
  if (x <= -10.0) return 0.0;
  if (x >= 10.0) return x;
  const double xr = fp16_to_fp32(fp32_to_fp16(static_cast<float>(x)));
  const double g = 0.5 * xr * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (xr + 0.044715 * xr * xr * xr)));
  return fp16_to_fp32(fp32_to_fp16(static_cast<float>(g)));
}

// Logits [n x vocab] of every position.
std::vector<Vec> reference(const Spec& s, const Weights& wt, const std::vector<int32_t>& tokens) {
  const bool gem = s.arch == "gemma3";
  const int E = s.n_embd, hd = s.head_dim, G = s.n_head / s.n_head_kv;
  const double eps = 1e-6;
  const int n = static_cast<int>(tokens.size());
  std::vector<Vec> h(static_cast<size_t>(n));
  const auto& emb = wt.at("token_embd.weight");
  for (int t = 0; t < n; ++t) {
    h[static_cast<size_t>(t)].assign(emb.begin() + tokens[static_cast<size_t>(t)] * E,
                                     emb.begin() + (tokens[static_cast<size_t>(t)] + 1) * E);
    if (gem)
      for (auto& v : h[static_cast<size_t>(t)]) v *= std::sqrt(static_cast<float>(E));
  }
  const std::vector<float>* ff = wt.count("rope_freqs.weight") ? &wt.at("rope_freqs.weight") : nullptr;
  for (int il = 0; il < s.n_layer; ++il) {
    const std::string p = fmt::format("blk.{}.", il);
    const bool swa = gem && il % 6 < 5;
    const double base = swa ? 10000.0 : s.rope_base;
    const double scale = swa ? 1.0 : 1.0 / s.rope_scale;
    std::vector<Vec> q(static_cast<size_t>(n)), k(static_cast<size_t>(n)), v(static_cast<size_t>(n));
    for (int t = 0; t < n; ++t) {
      const Vec x = rmsnorm(h[static_cast<size_t>(t)], wt.at(p + "attn_norm.weight"), eps);
      q[static_cast<size_t>(t)] = matvec(wt.at(p + "attn_q.weight"), s.n_head * hd, E, x);
      k[static_cast<size_t>(t)] = matvec(wt.at(p + "attn_k.weight"), s.n_head_kv * hd, E, x);
      v[static_cast<size_t>(t)] = matvec(wt.at(p + "attn_v.weight"), s.n_head_kv * hd, E, x);
      for (int hh = 0; hh < s.n_head; ++hh) {
        double* qh = q[static_cast<size_t>(t)].data() + hh * hd;
        if (gem) {
          const Vec n1 = rmsnorm(Vec(qh, qh + hd), wt.at(p + "attn_q_norm.weight"), eps);
          std::copy(n1.begin(), n1.end(), qh);
        }
        rope(qh, hd, s.n_rot, gem, base, scale, gem ? nullptr : ff, t);
      }
      for (int g = 0; g < s.n_head_kv; ++g) {
        double* kh = k[static_cast<size_t>(t)].data() + g * hd;
        if (gem) {
          const Vec n1 = rmsnorm(Vec(kh, kh + hd), wt.at(p + "attn_k_norm.weight"), eps);
          std::copy(n1.begin(), n1.end(), kh);
        }
        rope(kh, hd, s.n_rot, gem, base, scale, gem ? nullptr : ff, t);
      }
    }
    for (int t = 0; t < n; ++t) {
      Vec att(static_cast<size_t>(s.n_head * hd), 0.0);
      for (int hh = 0; hh < s.n_head; ++hh) {
        const int g = hh / G;
        std::vector<double> sc;
        std::vector<int> js;
        for (int j = 0; j <= t; ++j) {
          if (swa && t - j >= s.window) continue;
          double d = 0;
          for (int i = 0; i < hd; ++i)
            d += q[static_cast<size_t>(t)][static_cast<size_t>(hh * hd + i)] *
                 k[static_cast<size_t>(j)][static_cast<size_t>(g * hd + i)];
          sc.push_back(d / std::sqrt(static_cast<double>(hd)));
          js.push_back(j);
        }
        double mx = sc[0], sum = 0;
        for (const double x : sc) mx = std::max(mx, x);
        for (auto& x : sc) sum += (x = std::exp(x - mx));
        for (size_t jj = 0; jj < sc.size(); ++jj)
          for (int i = 0; i < hd; ++i)
            att[static_cast<size_t>(hh * hd + i)] +=
                sc[jj] / sum * v[static_cast<size_t>(js[jj])][static_cast<size_t>(g * hd + i)];
      }
      Vec o = matvec(wt.at(p + "attn_output.weight"), E, s.n_head * hd, att);
      if (gem) o = rmsnorm(o, wt.at(p + "post_attention_norm.weight"), eps);
      for (int i = 0; i < E; ++i) h[static_cast<size_t>(t)][static_cast<size_t>(i)] += o[static_cast<size_t>(i)];
      const Vec x = rmsnorm(h[static_cast<size_t>(t)], wt.at(p + "ffn_norm.weight"), eps);
      Vec gt = matvec(wt.at(p + "ffn_gate.weight"), s.n_ff, E, x);
      const Vec up = matvec(wt.at(p + "ffn_up.weight"), s.n_ff, E, x);
      for (int i = 0; i < s.n_ff; ++i) {
        const double a = gt[static_cast<size_t>(i)];
        gt[static_cast<size_t>(i)] = (gem ? gelu_f16_table(a) : a / (1.0 + std::exp(-a))) * up[static_cast<size_t>(i)];
      }
      Vec f = matvec(wt.at(p + "ffn_down.weight"), E, s.n_ff, gt);
      if (gem) f = rmsnorm(f, wt.at(p + "post_ffw_norm.weight"), eps);
      for (int i = 0; i < E; ++i) h[static_cast<size_t>(t)][static_cast<size_t>(i)] += f[static_cast<size_t>(i)];
    }
  }
  std::vector<Vec> logits;
  const auto& out = s.tied ? wt.at("token_embd.weight") : wt.at("output.weight");
  for (int t = 0; t < n; ++t)
    logits.push_back(matvec(out, s.n_vocab, E, rmsnorm(h[static_cast<size_t>(t)], wt.at("output_norm.weight"), eps)));
  return logits;
}

void expect_matches_reference(const Spec& s, const std::string& name, double tol) {
  Built b = build(s);
  auto model = Model::load(write_tmp(b.w, name));
  std::vector<int32_t> tokens;
  for (int i = 0; i < 14; ++i) tokens.push_back((i * 7 + 3) % s.n_vocab);
  const auto ref = reference(s, b.wt, tokens);
  std::vector<std::vector<float>> outs;
  for (const int chunk : {512, 4}) {  // 10 = 4 + 4 + 2: no single-token chunk (decode kernels)
    TestSessionOptions o;
    o.kv_type = KVType::F32;
    o.prefill_chunk = chunk;
    TestSession sess(model, o);
    std::vector<float> all;
    sess.prefill(std::span(tokens).first(10), false, &all);
    double worst = 0;
    for (size_t t = 0; t < 10; ++t)
      for (int i = 0; i < s.n_vocab; ++i)
        worst = std::max(worst, std::fabs(all[t * static_cast<size_t>(s.n_vocab) + static_cast<size_t>(i)] -
                                          ref[t][static_cast<size_t>(i)]));
    for (size_t t = 10; t < tokens.size(); ++t) {  // decode the rest
      const auto l = sess.decode(tokens[t]);
      for (int i = 0; i < s.n_vocab; ++i)
        worst = std::max(worst, std::fabs(l[static_cast<size_t>(i)] - ref[t][static_cast<size_t>(i)]));
    }
    EXPECT_LT(worst, tol) << name << " chunk " << chunk;
    outs.push_back(all);
  }
  EXPECT_EQ(outs[0], outs[1]) << name << ": chunked prefill differs from one batch";
}

TEST(SyntheticArch, LlamaMatchesNaiveTransformer) {
  Spec s;
  expect_matches_reference(s, "llama_plain", 2e-4);
  s.tied = true;
  s.rope_freqs = true;
  s.rope_scale = 2.0f;
  s.n_rot = 6;  // partial rotary dims
  s.n_head_kv = 1;
  expect_matches_reference(s, "llama_tied_ropefreqs", 2e-4);
  auto m = Model::load(write_tmp(build(s).w, "llama_tied_ropefreqs"));
  EXPECT_TRUE(m->config().tied_output);
  EXPECT_FLOAT_EQ(m->config().rope_freq_scale, 0.5f);
  EXPECT_EQ(m->config().n_rot, 6);
}

TEST(SyntheticArch, Gemma3MatchesNaiveTransformer) {
  Spec s;
  s.arch = "gemma3";
  s.n_layer = 7;  // layers 0-4 and 6 sliding-window, 5 full
  s.n_head = 4;
  s.n_head_kv = 1;
  s.head_dim = 16;
  s.n_rot = 16;
  s.window = 4;  // 14 tokens: keys beyond the window are masked in the SWA layers
  s.tied = true;
  s.rope_base = 1e6f;
  // 1e-3: the F16 GELU table can round an input differently when f32 and double pre-activations
  // straddle an F16 rounding boundary (logits are O(1)).
  expect_matches_reference(s, "gemma3_tiny", 1e-3);
  auto m = Model::load(write_tmp(build(s).w, "gemma3_tiny"));
  EXPECT_EQ(m->config().layer_window(5), 0);
  EXPECT_EQ(m->config().layer_window(6), 4);
  EXPECT_FLOAT_EQ(m->config().embd_scale, std::sqrt(32.0f));
}

std::string load_error(const GGUFWriter& w, const std::string& name) {
  try {
    Model::load(write_tmp(w, name));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SyntheticArch, LoadErrorsNameTheProblem) {
  Spec s;
  EXPECT_NE(load_error(build(s, "llama.block_count").w, "no_block_count").find("llama.block_count"), std::string::npos);
  EXPECT_NE(load_error(build(s, "general.architecture").w, "no_arch").find("general.architecture"), std::string::npos);
  EXPECT_NE(load_error(build(s, "", "blk.1.ffn_up.weight").w, "no_tensor").find("blk.1.ffn_up.weight"),
            std::string::npos);
  Spec g = s;
  g.arch = "gpt2";
  EXPECT_NE(load_error(build(g).w, "gpt2").find("unsupported architecture 'gpt2'"), std::string::npos);
  {
    Built b = build(s, "", "blk.0.attn_k.weight");  // wrong shape: [E, E] instead of [E, kv_dim]
    std::vector<float> v(static_cast<size_t>(s.n_embd * s.n_embd), 0.1f);
    b.w.add_tensor_f32("blk.0.attn_k.weight", {s.n_embd, s.n_embd}, v);
    const std::string e = load_error(b.w, "bad_shape");
    EXPECT_NE(e.find("blk.0.attn_k.weight"), std::string::npos) << e;
    EXPECT_NE(e.find("shape"), std::string::npos) << e;
  }
  {
    Built b = build(s, "", "blk.0.attn_q.weight");  // a type snapkv has no kernels for
    std::vector<uint8_t> bytes(static_cast<size_t>(s.n_embd * s.n_head * s.head_dim), 1);
    b.w.add_tensor("blk.0.attn_q.weight", GGMLType::I8, {s.n_embd, s.n_head * s.head_dim}, bytes);
    const std::string e = load_error(b.w, "bad_type");
    EXPECT_NE(e.find("unsupported type I8"), std::string::npos) << e;
  }
  {
    Built b = build(s);
    std::vector<float> bias(static_cast<size_t>(s.n_head * s.head_dim), 0.0f);
    b.w.add_tensor_f32("blk.0.attn_q.bias", {s.n_head * s.head_dim}, bias);
    EXPECT_NE(load_error(b.w, "bias").find("attn_q.bias"), std::string::npos);
  }
  EXPECT_THROW(Model::load("/nonexistent/model.gguf"), Error);
}

}  // namespace
}  // namespace snapkv
