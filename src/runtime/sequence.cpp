// snapkv runtime: Sequence (see snapkv/sequence.h) and its state.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "runtime/reselect.h"
#include "runtime/sequence_state.h"
#include "runtime/workspace_impl.h"
#include "snapkv/error.h"

namespace snapkv {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

std::vector<int> layer_windows(const ModelConfig& c) {
  std::vector<int> w(static_cast<size_t>(c.n_layer));
  for (int il = 0; il < c.n_layer; ++il) w[static_cast<size_t>(il)] = c.layer_window(il);
  return w;
}

}  // namespace

Sequence::State::State(std::shared_ptr<const Model> m, const SequenceOptions& o, int64_t ctx)
    : model(std::move(m)),
      opt(o),
      n_ctx(ctx),
      cache(model->config().n_layer, model->config().n_head_kv, model->config().head_dim, o.kv_type,
            o.kv_type_v.value_or(o.kv_type), layer_windows(model->config())) {
  stats.kept_tokens_per_layer.assign(static_cast<size_t>(model->config().n_layer), 0.0);
}

void Sequence::State::sample_peak() {
  stats.kv_cache_bytes = cache.bytes();
  stats.peak_kv_cache_bytes = std::max(stats.peak_kv_cache_bytes, stats.kv_cache_bytes);
}

void Sequence::State::update_stats() {
  const ModelConfig& c = model->config();
  sample_peak();
  size_t full = 0;
  const size_t per_entry =
      static_cast<size_t>(c.n_head_kv) * kv_entry_bytes(cache.k_type(), cache.v_type(), c.head_dim);
  for (int il = 0; il < c.n_layer; ++il) {
    // Full-attention layers would hold every token uncompressed. Sliding-window layers are never
    // compressed, so what they hold now is exactly what a full cache holds (their window plus
    // the trimming slack): with no press, full == held.
    if (c.layer_window(il) > 0) {
      full += cache.layer(il).bytes();
    } else {
      full += static_cast<size_t>(n_past) * per_entry;
    }
    stats.kept_tokens_per_layer[static_cast<size_t>(il)] = cache.layer(il).mean_entries();
  }
  stats.kv_cache_bytes_full = full;
  stats.kv_cold_bytes = cold ? cold->bytes() : 0;
}

PressInput Sequence::State::layer_input(int il, int64_t n_tokens, int window, const float* window_q,
                                        int n_threads) const {
  const ModelConfig& c = model->config();
  PressInput in;
  in.layer = il;
  in.n_tokens = n_tokens;
  in.n_head = c.n_head;
  in.n_head_kv = c.n_head_kv;
  in.head_dim = c.head_dim;
  in.attn_scale = c.attn_scale;
  in.window = window;
  in.window_q = window_q;
  in.n_threads = n_threads;
  for (const auto& hc : cache.layer(il).heads) {
    if (hc.size() != n_tokens)
      throw Error(fmt::format("layer {}: cache holds {} entries, expected {}", il, hc.size(), n_tokens));
    in.keys.push_back(hc.keys());
    in.values.push_back(hc.values());
  }
  return in;
}

void Sequence::State::compress_layer(int il, const PressPlan& plan, int compress_index, int n_compress_layers,
                                     int64_t n_tokens, const float* window_q, const float* all_q, int n_threads) {
  const ModelConfig& c = model->config();
  const auto t0 = Clock::now();
  KVLayerCache& L = cache.layer(il);
  PressInput in = layer_input(il, n_tokens, plan.window, window_q, n_threads);
  in.compress_index = compress_index;
  in.n_compress_layers = n_compress_layers;
  in.all_q = all_q;
  PressResult r = plan.press->compress(in, plan.capacity);
  if (opt.cold_tier.enabled) {  // issue 10: every prompt entry to the cold tier before the eviction
    if (!cold) cold = std::make_shared<ColdStore>(c.n_layer, c.n_head_kv, c.head_dim, opt.cold_tier);
    cold->put_layer(L);
  }
  if (r.kept.size() != L.heads.size())
    throw Error(fmt::format("press '{}' returned {} heads for layer {}, expected {}", plan.press->name(), r.kept.size(),
                            il, L.heads.size()));
  KeptLayer kl;
  kl.layer = il;
  for (size_t g = 0; g < L.heads.size(); ++g) {
    L.heads[g].keep(r.kept[g]);  // entry i has position i: indices == positions
    if (opt.log_kept) {
      const auto p = L.heads[g].positions();
      kl.positions.emplace_back(p.begin(), p.end());
    }
  }
  if (opt.log_kept) {
    kl.scores = std::move(r.scores);
    kept.push_back(std::move(kl));
  }
  stats.compression_ms += ms_since(t0);
  sample_peak();
}

void Sequence::State::roll_back_decode(int64_t n_past_before) {
  n_past = n_past_before;
  for (int il = 0; il < cache.n_layer(); ++il)
    for (KVHeadCache& h : cache.layer(il).heads) h.drop_from(static_cast<int32_t>(n_past_before));
  update_stats();
}

void Sequence::State::clear() {
  cache.clear();
  n_past = 0;
  stats = SequenceStats{};
  stats.kept_tokens_per_layer.assign(static_cast<size_t>(model->config().n_layer), 0.0);
  kept.clear();
  job.reset();
  last_logits.clear();
  last_logits.shrink_to_fit();
  compressed_once = false;
  retained_w = 0;
  retained_n = 0;
  retained_question = 0;
  retained_q.clear();
  retained_q.shrink_to_fit();
  cold.reset();
}

Sequence::Sequence(std::unique_ptr<State> s) : s_(std::move(s)) {}
Sequence::~Sequence() = default;

int64_t Sequence::n_past() const { return s_->n_past; }
int64_t Sequence::n_ctx() const { return s_->n_ctx; }
KVType Sequence::kv_type() const { return s_->cache.k_type(); }
KVType Sequence::kv_type_v() const { return s_->cache.v_type(); }
const ColdTierOptions& Sequence::cold_tier() const { return s_->opt.cold_tier; }
const SequenceStats& Sequence::stats() const { return s_->stats; }
const std::vector<KeptLayer>& Sequence::kept() const { return s_->kept; }
bool Sequence::prefilling() const { return s_->job != nullptr; }
int64_t Sequence::prefill_rows_left() const {
  if (!s_->job) return 0;
  const PrefillJob& j = *s_->job;
  return static_cast<int64_t>(s_->model->config().n_layer - j.layer) * j.n - j.done;
}
std::span<const float> Sequence::prefill_logits() const { return s_->last_logits; }
const KVCache& Sequence::kv_cache() const { return s_->cache; }
void Sequence::reset() { s_->clear(); }

void Sequence::begin_prefill(std::span<const int32_t> tokens, const PrefillOptions& opt) {
  State& st = *s_;
  const ModelConfig& c = st.model->config();
  const auto n = static_cast<int64_t>(tokens.size());
  if (st.job) throw Error("prefill: a prefill of this sequence is already pending");
  if (n == 0) throw Error("prefill: empty token batch");
  if (st.n_past + n > st.n_ctx) {
    if (st.n_past == 0)
      throw Error(fmt::format("prompt of {} tokens does not fit the context of {} tokens (-c)", n, st.n_ctx));
    throw Error(
        fmt::format("{} more tokens after {} do not fit the context of {} tokens (-c)", n, st.n_past, st.n_ctx));
  }
  if (opt.retain_window < 0 || opt.retain_window > n)
    throw Error(
        fmt::format("prefill: retain_window {} must be in [0, {}] (the prompt's tokens)", opt.retain_window, n));
  if (opt.question_tokens < 0 || opt.question_tokens > n)
    throw Error(
        fmt::format("prefill: question_tokens {} must be in [0, {}] (the prompt's tokens)", opt.question_tokens, n));
  auto job = std::make_unique<PrefillJob>();
  job->plan = plan_press(opt.press, n, opt.question_tokens);  // throws for a bad spec
  const bool press_on = opt.press.name != "none";
  if (press_on && (st.n_past != 0 || st.compressed_once))
    throw Error(fmt::format("compression is one-shot: prefill with compression needs an empty cache ({} tokens held)",
                            st.n_past));
  if (opt.retain_window > 0 && (st.n_past != 0 || st.compressed_once))
    throw Error("prefill: retain_window needs an empty, uncompressed sequence");
  if (opt.reselect) {
    if (!st.opt.cold_tier.enabled)
      throw Error("prefill: reselect needs a sequence with a cold tier (SequenceOptions::cold_tier)");
    if (press_on) throw Error("prefill: reselect takes no press (the sequence's own press re-selects)");
    if (st.n_past == 0) throw Error("prefill: reselect needs a sequence that holds a prompt");
  }
  job->n = n;
  job->h.resize(static_cast<size_t>(n * c.n_embd));
  st.model->embed(tokens, job->h.data());  // validates the ids before anything changes
  job->pos.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) job->pos[static_cast<size_t>(i)] = static_cast<int32_t>(st.n_past + i);
  job->window = job->plan.compress ? job->plan.window : 0;
  job->window = std::max<int64_t>(job->window, opt.retain_window);
  // A prompt the press did not compress has no cold layers: nothing to re-select.
  job->reselect = opt.reselect && st.cold != nullptr;
  // The cold store of a compressing prefill exists (with its file) before anything changes.
  if (job->plan.compress && st.opt.cold_tier.enabled)
    job->cold = std::make_shared<ColdStore>(c.n_layer, c.n_head_kv, c.head_dim, st.opt.cold_tier);
  if (job->reselect) job->window = reselect_params(st.stats.press, n).window;
  job->window_q.assign(static_cast<size_t>(job->window) * c.n_head * c.head_dim, 0.0f);
  if (job->plan.compress && job->plan.needs_all_queries)
    job->all_q.assign(static_cast<size_t>(n) * c.n_head * c.head_dim, 0.0f);
  for (int il = 0; il < c.n_layer; ++il) job->n_compress_layers += c.layer_window(il) == 0 ? 1 : 0;
  job->retain_window = opt.retain_window;
  job->question_tokens = opt.question_tokens;
  job->press_on = press_on;
  job->all_logits = opt.all_logits;
  job->progress = opt.progress;
  // Nothing else of the sequence changes until a step starts the job (start_job): a prefill
  // dropped before it ran (Engine::prefill whose step was rejected) leaves no trace.
  st.job = std::move(job);
}

void Sequence::State::start_job() {
  PrefillJob& j = *job;
  j.started = true;
  if (j.cold) cold = std::move(j.cold);
  if (j.press_on) {
    stats.press = j.plan.spec;
    stats.compressed = j.plan.compress;
    stats.budget = j.plan.compress ? j.plan.capacity : 0;
    stats.compression_note = j.plan.note;
    stats.window = j.plan.compress ? j.plan.window : 0;
  }
  if (n_past == 0) stats.n_prompt_tokens = j.n;
  if (j.retain_window > 0) {
    retained_w = j.retain_window;
    retained_n = j.n;
    retained_question = j.question_tokens;
    retained_q.assign(static_cast<size_t>(model->config().n_layer), {});
  }
}

std::unique_ptr<Sequence> Sequence::fork() const {
  const State& st = *s_;
  if (st.job) throw Error("fork: the sequence has a pending prefill");
  auto s = std::make_unique<State>(st.model, st.opt, st.n_ctx);
  s->cache = st.cache.clone();
  s->n_past = st.n_past;
  s->stats = st.stats;
  s->kept = st.kept;
  s->last_logits = st.last_logits;
  s->compressed_once = st.compressed_once;
  s->retained_w = st.retained_w;
  s->retained_n = st.retained_n;
  s->retained_question = st.retained_question;
  s->retained_q = st.retained_q;
  s->cold = st.cold;  // immutable once the compression is done: shared
  return std::unique_ptr<Sequence>(new Sequence(std::move(s)));
}

void Sequence::compress(const PressSpec& press, Workspace& ws) {
  State& st = *s_;
  const ModelConfig& c = st.model->config();
  if (st.job) throw Error("compress: the sequence has a pending prefill");
  if (st.compressed_once) throw Error("compress: compression is one-shot and this sequence was already compressed");
  if (st.retained_w == 0 || st.retained_n != st.n_past)
    throw Error(fmt::format(
        "compress: needs the prompt's window queries (PrefillOptions::retain_window) and the sequence holding exactly "
        "that prompt ({} tokens held, {} retained)",
        st.n_past, st.retained_n));
  PressPlan plan = plan_press(press, st.n_past, st.retained_question);
  if (press.name == "none") return;
  if (plan.compress && plan.needs_all_queries)
    throw Error(fmt::format("compress: press {} needs every prompt query; give it to the prefill instead", plan.spec));
  if (plan.compress && plan.window > st.retained_w)
    throw Error(fmt::format("compress: press window {} exceeds the {} retained queries (PrefillOptions::retain_window)",
                            plan.window, st.retained_w));
  const int W = plan.window, R = st.retained_w, hd = c.head_dim;
  // Every full-attention layer must hold its R retained queries (checked before anything changes).
  const size_t per_layer = static_cast<size_t>(c.n_head) * static_cast<size_t>(R) * static_cast<size_t>(hd);
  for (int il = 0; il < c.n_layer; ++il) {
    const auto l = static_cast<size_t>(il);
    const bool held = l < st.retained_q.size() && st.retained_q[l].size() == per_layer;
    if (c.layer_window(il) == 0 && !held)
      throw Error(fmt::format("compress: layer {} has no retained queries of the prompt", il));
  }
  // The cold store (and its file) before anything changes: a bad directory leaves the prompt as it was.
  std::shared_ptr<ColdStore> cold;
  if (plan.compress && st.opt.cold_tier.enabled)
    cold = std::make_shared<ColdStore>(c.n_layer, c.n_head_kv, c.head_dim, st.opt.cold_tier);
  st.stats.press = plan.spec;
  st.stats.compressed = plan.compress;
  st.stats.budget = plan.compress ? plan.capacity : 0;
  st.stats.compression_note = plan.note;
  st.stats.window = plan.compress ? plan.window : 0;
  if (!plan.compress) return;  // the prompt is kept whole: nothing was compressed, compress() may run again
  st.compressed_once = true;
  st.cold = std::move(cold);
  std::vector<float> wq(static_cast<size_t>(c.n_head) * W * hd);
  int ci = 0, n_full = 0;
  for (int il = 0; il < c.n_layer; ++il) n_full += c.layer_window(il) == 0 ? 1 : 0;
  try {
    for (int il = 0; il < c.n_layer; ++il) {
      if (c.layer_window(il) > 0) continue;
      const std::vector<float>& rq = st.retained_q[static_cast<size_t>(il)];
      for (int h = 0; h < c.n_head; ++h)
        std::memcpy(wq.data() + static_cast<size_t>(h) * W * hd,
                    rq.data() + (static_cast<size_t>(h) * R + static_cast<size_t>(R - W)) * hd,
                    sizeof(float) * static_cast<size_t>(W) * hd);
      st.compress_layer(il, plan, ci++, n_full, st.n_past, wq.data(), nullptr, ws.impl().tc.n_threads());
    }
  } catch (...) {
    st.clear();
    throw;
  }
  // Compression is one-shot: the retained queries have served (an idle compressed sequence holds
  // only its KV entries, positions and constant_bytes()).
  st.retained_w = 0;
  st.retained_n = 0;
  st.retained_question = 0;
  std::vector<std::vector<float>>().swap(st.retained_q);
  st.update_stats();
}

size_t Sequence::constant_bytes() const {
  const State& st = *s_;
  // Each heap block costs its size rounded up plus a malloc header of about 16 bytes.
  constexpr size_t kBlockOverhead = 16;
  size_t b = sizeof(Sequence) + sizeof(State) + 2 * kBlockOverhead;
  const size_t n_layer = static_cast<size_t>(st.cache.n_layer());
  const size_t n_heads = n_layer * static_cast<size_t>(st.cache.n_head_kv());
  b += n_layer * sizeof(KVLayerCache) + kBlockOverhead;           // the layer records
  b += n_heads * sizeof(KVHeadCache) + n_layer * kBlockOverhead;  // the head records
  // pos/K/V blocks of each head (a buffer of 256 KiB or more is a memory mapping instead, whose
  // unused tail of under one page is not counted: kv/row_buffer.h)
  b += n_heads * 3 * kBlockOverhead;
  b += st.stats.kept_tokens_per_layer.capacity() * sizeof(double) + kBlockOverhead;
  // Held only until they are used: the prefill logits until the first decoded token, the
  // retained window queries until compress().
  b += st.last_logits.capacity() * sizeof(float);
  for (const auto& q : st.retained_q) b += q.capacity() * sizeof(float) + kBlockOverhead;
  b += st.retained_q.capacity() * sizeof(std::vector<float>);
  return b;
}

}  // namespace snapkv
