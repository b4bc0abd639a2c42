// Inference session: layer-major prefill with one-shot per-layer compression, and decoding.
#include "runtime/session.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>

#include "snapkv/error.h"

namespace snapkv {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

const Model& checked(const std::shared_ptr<const Model>& m) {
  if (!m) throw Error("Session: no model");
  return *m;
}

int64_t resolve_n_ctx(const Model& m, int64_t n_ctx) {
  if (n_ctx < 0) throw Error(fmt::format("context size (-c) {} must be >= 1 (or 0 for the model's)", n_ctx));
  const int64_t c = n_ctx == 0 ? m.config().n_ctx_train : n_ctx;
  if (c < 1 || c > (int64_t{1} << 30)) throw Error(fmt::format("context size (-c) {} is out of range", c));
  return c;
}

std::vector<int> layer_windows(const ModelConfig& c) {
  std::vector<int> w(static_cast<size_t>(c.n_layer));
  for (int il = 0; il < c.n_layer; ++il) w[static_cast<size_t>(il)] = c.layer_window(il);
  return w;
}

// Sliding-window layer after a prefill batch: a later query (position >= the next position)
// sees only the window - 1 most recent entries, so keep exactly those and release the rest
// (KVHeadCache::keep reallocates to the exact size). Without this a prefill leaves up to
// window - 1 + prefill_chunk entries per head, more than kv_cache_bytes_full accounts for.
void trim_swa_layer(KVLayerCache& layer) {
  const int64_t keep = layer.window - 1;
  for (auto& h : layer.heads) {
    if (h.size() <= keep) continue;
    std::vector<int32_t> idx(static_cast<size_t>(keep));
    std::iota(idx.begin(), idx.end(), static_cast<int32_t>(h.size() - keep));
    h.keep(idx);
  }
}

}  // namespace

Session::Session(std::shared_ptr<const Model> model, SessionOptions opt)
    : model_(std::move(model)),
      opt_(std::move(opt)),
      n_ctx_(resolve_n_ctx(checked(model_), opt_.n_ctx)),
      cache_(model_->config().n_layer, model_->config().n_head_kv, model_->config().head_dim, opt_.kv_type,
             layer_windows(model_->config())) {
  const ModelConfig& c = model_->config();
  if (opt_.prefill_chunk < 1) throw Error(fmt::format("prefill chunk {} must be >= 1", opt_.prefill_chunk));
  if (opt_.press.name != "none") press_ = make_press(opt_.press);
  const int64_t chunk = std::min<int64_t>(opt_.prefill_chunk, n_ctx_);
  buf_ = std::make_unique<ForwardBuffers>(c, chunk);
  attn_ws_ = std::make_unique<AttentionWorkspace>(model_->attention_params(0), chunk);
  h_dec_.resize(static_cast<size_t>(c.n_embd));
  tmp_dec_.resize(static_cast<size_t>(c.n_embd));
  logits_.resize(static_cast<size_t>(c.n_vocab));
  stats_.kept_tokens_per_layer.assign(static_cast<size_t>(c.n_layer), 0.0);
}

Session::~Session() = default;

void Session::reset() {
  cache_.clear();
  n_past_ = 0;
  stats_ = SessionStats{};
  stats_.kept_tokens_per_layer.assign(static_cast<size_t>(model_->config().n_layer), 0.0);
  kept_.clear();
  h_.clear();
  h_.shrink_to_fit();
  pos_.clear();
  pos_.shrink_to_fit();
  window_q_.clear();
  window_q_.shrink_to_fit();
  all_q_.clear();
  all_q_.shrink_to_fit();
}

void Session::sample_peak() {
  stats_.kv_cache_bytes = cache_.bytes();
  stats_.peak_kv_cache_bytes = std::max(stats_.peak_kv_cache_bytes, stats_.kv_cache_bytes);
}

void Session::update_stats() {
  const ModelConfig& c = model_->config();
  sample_peak();
  size_t full = 0;
  const size_t per_entry =
      static_cast<size_t>(c.n_head_kv) * 2 * static_cast<size_t>(c.head_dim) * kv_type_size(opt_.kv_type);
  for (int il = 0; il < c.n_layer; ++il) {
    // Full-attention layers would hold every token uncompressed. Sliding-window layers are
    // never compressed, so what they hold now is exactly what a full cache holds (their
    // window plus the trimming slack): with --press none, full == held.
    if (c.layer_window(il) > 0) {
      full += cache_.layer(il).bytes();
    } else {
      full += static_cast<size_t>(n_past_) * per_entry;
    }
    stats_.kept_tokens_per_layer[static_cast<size_t>(il)] = cache_.layer(il).mean_entries();
  }
  stats_.kv_cache_bytes_full = full;
}

void Session::run_layer(int il, const int32_t* pos, float* h, int64_t n, int64_t window, bool need_all_q) {
  const ModelConfig& c = model_->config();
  const int64_t E = c.n_embd;
  const int hd = c.head_dim;
  const int64_t q_dim = static_cast<int64_t>(c.n_head) * hd;
  const int64_t C = buf_->capacity;
  const bool swa = c.layer_window(il) > 0;
  if (!swa) cache_.make_room(il, n);  // full layers: exactly the batch, once
  for (int64_t s = 0; s < n; s += C) {
    const int64_t cn = std::min(C, n - s);
    if (swa) cache_.make_room(il, cn);
    BlockBatch b;
    b.n = cn;
    b.pos = pos + s;
    b.h = h + s * E;
    b.buf = buf_.get();
    b.attn_ws = attn_ws_.get();
    model_->forward_layer(il, b, cache_.layer(il));
    sample_peak();
    // Keep the queries the press needs: [n_head][W][hd] for the window, [n_head][n][hd] for all.
    for (int64_t t = std::max(s, n - window); t < s + cn && window > 0; ++t) {
      const float* src = buf_->q.data() + (t - s) * q_dim;
      for (int hq = 0; hq < c.n_head; ++hq)
        std::memcpy(window_q_.data() + (static_cast<size_t>(hq) * window + (t - (n - window))) * hd, src + hq * hd,
                    sizeof(float) * hd);
    }
    if (need_all_q) {
      for (int64_t t = s; t < s + cn; ++t) {
        const float* src = buf_->q.data() + (t - s) * q_dim;
        for (int hq = 0; hq < c.n_head; ++hq)
          std::memcpy(all_q_.data() + (static_cast<size_t>(hq) * n + t) * hd, src + hq * hd, sizeof(float) * hd);
      }
    }
  }
}

void Session::compress_layer(int il, int compress_index, int n_compress_layers, int64_t n_tokens, int64_t capacity) {
  const ModelConfig& c = model_->config();
  const auto t0 = Clock::now();
  KVLayerCache& L = cache_.layer(il);
  PressInput in;
  in.layer = il;
  in.compress_index = compress_index;
  in.n_compress_layers = n_compress_layers;
  in.n_tokens = n_tokens;
  in.n_head = c.n_head;
  in.n_head_kv = c.n_head_kv;
  in.head_dim = c.head_dim;
  in.attn_scale = c.attn_scale;
  in.window = opt_.press.window;
  in.window_q = window_q_.data();
  in.all_q = all_q_.empty() ? nullptr : all_q_.data();
  for (const auto& hc : L.heads) {
    if (hc.size() != n_tokens)
      throw Error(
          fmt::format("layer {}: cache holds {} entries, expected the {} prompt tokens", il, hc.size(), n_tokens));
    in.keys.push_back(hc.keys());
    in.values.push_back(hc.values());
  }
  PressResult r = press_->compress(in, capacity);
  if (r.kept.size() != L.heads.size())
    throw Error(fmt::format("press '{}' returned {} heads for layer {}, expected {}", press_->name(), r.kept.size(), il,
                            L.heads.size()));
  KeptLayer kl;
  kl.layer = il;
  for (size_t g = 0; g < L.heads.size(); ++g) {
    L.heads[g].keep(r.kept[g]);  // entry i has position i: indices == positions
    const auto p = L.heads[g].positions();
    kl.positions.emplace_back(p.begin(), p.end());
  }
  kl.scores = std::move(r.scores);
  kept_.push_back(std::move(kl));
  stats_.compression_ms += ms_since(t0);
  sample_peak();
}

std::span<const float> Session::prefill(std::span<const int32_t> tokens, bool compress, std::vector<float>* all_logits,
                                        const std::function<void(int, int)>& progress) {
  const ModelConfig& c = model_->config();
  const auto n = static_cast<int64_t>(tokens.size());
  if (n == 0) throw Error("prefill: empty token batch");
  if (n_past_ + n > n_ctx_) {
    if (n_past_ == 0)
      throw Error(fmt::format("prompt of {} tokens does not fit the context of {} tokens (-c)", n, n_ctx_));
    throw Error(fmt::format("{} more tokens after {} do not fit the context of {} tokens (-c)", n, n_past_, n_ctx_));
  }
  const bool press_on = compress && press_ != nullptr;
  if (press_on && n_past_ != 0)
    throw Error(fmt::format("compression is one-shot: prefill with compression needs an empty cache ({} tokens held)",
                            n_past_));
  int64_t capacity = n;
  if (press_on) capacity = press_capacity(opt_.press, n);
  const bool do_compress = press_on && n > capacity;
  int64_t window = 0;
  bool need_all_q = false;
  if (do_compress) {
    window = opt_.press.window;
    if (window < 1 || window >= n)
      throw Error(fmt::format("press window {} must be in [1, {}) for a prompt of {} tokens", window, n, n));
    need_all_q = press_->needs_all_queries();
  }

  const auto t0 = Clock::now();
  const int64_t E = c.n_embd;
  h_.resize(static_cast<size_t>(n * E));
  model_->embed(tokens, h_.data());  // validates the ids before anything changes
  pos_.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) pos_[static_cast<size_t>(i)] = static_cast<int32_t>(n_past_ + i);
  window_q_.assign(static_cast<size_t>(window) * c.n_head * c.head_dim, 0.0f);
  if (need_all_q)
    all_q_.assign(static_cast<size_t>(n) * c.n_head * c.head_dim, 0.0f);
  else
    all_q_.clear();

  int n_compress_layers = 0;
  for (int il = 0; il < c.n_layer; ++il) n_compress_layers += c.layer_window(il) == 0 ? 1 : 0;

  try {
    int ci = 0;
    for (int il = 0; il < c.n_layer; ++il) {
      const bool full = c.layer_window(il) == 0;
      run_layer(il, pos_.data(), h_.data(), n, full ? window : 0, full && need_all_q);
      if (do_compress && full) compress_layer(il, ci++, n_compress_layers, n, capacity);
      if (!full) trim_swa_layer(cache_.layer(il));
      if (progress) progress(il + 1, c.n_layer);
    }
    const int64_t V = c.n_vocab;
    if (all_logits) {
      all_logits->resize(static_cast<size_t>(n * V));
      const int64_t C = buf_->capacity;
      for (int64_t s = 0; s < n; s += C) {
        const int64_t cn = std::min(C, n - s);
        model_->logits(h_.data() + s * E, cn, all_logits->data() + s * V, buf_->xn.data());
      }
      std::memcpy(logits_.data(), all_logits->data() + (n - 1) * V, sizeof(float) * static_cast<size_t>(V));
    } else {
      model_->logits(h_.data() + (n - 1) * E, 1, logits_.data(), buf_->xn.data());
    }
  } catch (...) {
    reset();
    throw;
  }
  n_past_ += n;
  // The per-prompt buffers are not needed for decoding: release them.
  for (auto* v : {&h_, &all_q_, &window_q_}) {
    v->clear();
    v->shrink_to_fit();
  }
  pos_.clear();
  pos_.shrink_to_fit();
  update_stats();
  stats_.prefill_ms += ms_since(t0);
  return {logits_.data(), logits_.size()};
}

std::span<const float> Session::decode(int32_t token) {
  const ModelConfig& c = model_->config();
  if (n_past_ >= n_ctx_) throw Error(fmt::format("the context of {} tokens is full (-c)", n_ctx_));
  model_->embed({&token, 1}, h_dec_.data());
  const auto pos = static_cast<int32_t>(n_past_);
  try {
    for (int il = 0; il < c.n_layer; ++il) {
      cache_.make_room(il, 1);
      BlockBatch b;
      b.n = 1;
      b.pos = &pos;
      b.h = h_dec_.data();
      b.buf = buf_.get();
      b.attn_ws = attn_ws_.get();
      model_->forward_layer(il, b, cache_.layer(il));
      sample_peak();
    }
    model_->logits(h_dec_.data(), 1, logits_.data(), tmp_dec_.data());
  } catch (...) {
    reset();
    throw;
  }
  ++n_past_;
  update_stats();
  return {logits_.data(), logits_.size()};
}

}  // namespace snapkv
