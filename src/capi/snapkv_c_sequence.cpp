// snapkv C API: sequences, prefill, decode (one sequence and batched), generate, statistics
// (see snapkv/snapkv_c.h).
#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <string_view>

#include "capi/capi_impl.h"
#include "snapkv/cold_tier.h"
#include "snapkv/generate.h"
#include "snapkv/press_spec.h"
#include "snapkv/session.h"

using snapkv::capi::fail;
using snapkv::capi::guarded;
using snapkv::capi::valid;

namespace {

/// NULL, "" and "none" mean no compression; anything else is parsed (throws snapkv::Error).
snapkv::PressSpec parse_press(const char* press) {
  if (press == nullptr || press[0] == '\0') return {};
  return snapkv::PressSpec::parse(press);
}

std::string context_message(int64_t n_past, size_t n, int64_t n_ctx) {
  return std::to_string(n) + " tokens after the " + std::to_string(n_past) + " held do not fit the context of " +
         std::to_string(n_ctx) + " tokens";
}

snapkv_stop_reason to_c(snapkv::StopReason r) {
  switch (r) {
    case snapkv::StopReason::EOS:
      return SNAPKV_STOP_EOS;
    case snapkv::StopReason::NPredict:
      return SNAPKV_STOP_N_PREDICT;
    case snapkv::StopReason::ContextFull:
      return SNAPKV_STOP_CONTEXT_FULL;
    case snapkv::StopReason::StopString:
      return SNAPKV_STOP_STRING;
    case snapkv::StopReason::Cancelled:
      return SNAPKV_STOP_CANCELLED;
  }
  return SNAPKV_STOP_N_PREDICT;
}

/// The checks every prefill entry point makes (sequence, tokens, room in the context), then the
/// prefill with the options `make_options` gives (it may throw snapkv::Error: invalid argument).
/// `extra_check` returns a failure message for the caller's own arguments ("" if none).
template <class MakeOptions>
snapkv_status prefill_call(const char* fn, snapkv_sequence* seq, const int32_t* tokens, size_t n_tokens,
                           const float** logits, const std::string& extra_check, MakeOptions make_options) {
  if (!valid(seq)) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "seq is NULL or not a snapkv_sequence");
  if (tokens == nullptr) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "tokens is NULL");
  if (n_tokens == 0) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "no tokens (n_tokens is 0)");
  snapkv::Sequence& s = *seq->seq;
  if (n_tokens > static_cast<size_t>(s.n_ctx() - s.n_past()))
    return fail(SNAPKV_ERR_CONTEXT_FULL, fn, context_message(s.n_past(), n_tokens, s.n_ctx()));
  if (!extra_check.empty()) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, extra_check);
  return guarded(fn, SNAPKV_ERR_INVALID_ARGUMENT, [&] {
    const snapkv::PrefillOptions po = make_options();
    snapkv::capi::WorkspaceLease ws(*seq->core);
    const std::span<const float> l =
        seq->core->engine->prefill(s, std::span<const int32_t>(tokens, n_tokens), po, ws.get());
    if (logits != nullptr) *logits = l.data();
    return SNAPKV_OK;
  });
}

/// The KVType of a C enum value, or nullopt for a value outside snapkv_kv_type.
std::optional<snapkv::KVType> kv_type_of(snapkv_kv_type t) {
  switch (snapkv::capi::enum_value(t)) {
    case SNAPKV_KV_F16:
      return snapkv::KVType::F16;
    case SNAPKV_KV_F32:
      return snapkv::KVType::F32;
    case SNAPKV_KV_Q8_0:
      return snapkv::KVType::Q8_0;
    case SNAPKV_KV_Q4_0:
      return snapkv::KVType::Q4_0;
    default:
      return std::nullopt;
  }
}

/// snapkv_sequence_new / _cold / _kv: a sequence with keys of `k_type`, values of `v_type` and
/// the cold tier `cold_tier` names (nullptr: none). `two_types`: the caller's parameters are
/// k_type and v_type (snapkv_sequence_new_kv), not one kv_type (for the messages).
snapkv_status new_sequence(const char* fn, const snapkv_engine* engine, int64_t n_ctx, snapkv_kv_type k_type,
                           snapkv_kv_type v_type, bool two_types, const char* cold_tier, snapkv_sequence** out) {
  snapkv::ColdTierOptions ct;
  if (cold_tier != nullptr) {
    const snapkv_status parsed = guarded(fn, SNAPKV_ERR_INVALID_ARGUMENT, [&] {
      ct = snapkv::parse_cold_tier(cold_tier);
      return SNAPKV_OK;
    });
    if (parsed != SNAPKV_OK) return parsed;
  }
  if (!valid(engine)) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "engine is NULL or not a snapkv_engine");
  if (out == nullptr) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  const std::optional<snapkv::KVType> k = kv_type_of(k_type);
  const std::optional<snapkv::KVType> v = kv_type_of(v_type);
  auto bad = [&](const char* name, snapkv_kv_type t) {
    return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn,
                std::string(name) + " " + std::to_string(snapkv::capi::enum_value(t)) +
                    " is not SNAPKV_KV_F16, SNAPKV_KV_F32, SNAPKV_KV_Q8_0 or SNAPKV_KV_Q4_0");
  };
  if (!k) return bad(two_types ? "k_type" : "kv_type", k_type);
  if (!v) return bad("v_type", v_type);
  return guarded(fn, SNAPKV_ERR_INVALID_ARGUMENT, [&] {
    snapkv::SequenceOptions o;
    o.n_ctx = n_ctx;
    o.kv_type = *k;
    if (*v != *k) o.kv_type_v = *v;
    o.cold_tier = ct;
    auto h = std::make_unique<snapkv_sequence>();
    h->core = engine->core;
    h->seq = engine->core->engine->new_sequence(o);
    *out = h.release();
    return SNAPKV_OK;
  });
}

}  // namespace

extern "C" {

snapkv_status snapkv_sequence_new(const snapkv_engine* engine, int64_t n_ctx, snapkv_kv_type kv_type,
                                  snapkv_sequence** out) noexcept {
  return new_sequence("snapkv_sequence_new", engine, n_ctx, kv_type, kv_type, false, nullptr, out);
}

snapkv_status snapkv_sequence_new_cold(const snapkv_engine* engine, int64_t n_ctx, snapkv_kv_type kv_type,
                                       const char* cold_tier, snapkv_sequence** out) noexcept {
  static constexpr const char* fn = "snapkv_sequence_new_cold";
  if (cold_tier == nullptr) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "cold_tier is NULL");
  return new_sequence(fn, engine, n_ctx, kv_type, kv_type, false, cold_tier, out);
}

snapkv_status snapkv_sequence_new_kv(const snapkv_engine* engine, int64_t n_ctx, snapkv_kv_type k_type,
                                     snapkv_kv_type v_type, const char* cold_tier, snapkv_sequence** out) noexcept {
  return new_sequence("snapkv_sequence_new_kv", engine, n_ctx, k_type, v_type, true, cold_tier, out);
}

snapkv_status snapkv_prefill_reselect(snapkv_sequence* seq, const int32_t* tokens, size_t n_tokens,
                                      const float** logits) noexcept {
  return prefill_call("snapkv_prefill_reselect", seq, tokens, n_tokens, logits, "", [] {
    snapkv::PrefillOptions po;
    po.reselect = true;
    return po;
  });
}

snapkv_status snapkv_session_save(const snapkv_sequence* seq, const char* path) noexcept {
  static constexpr const char* fn = "snapkv_session_save";
  if (!valid(seq)) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "seq is NULL or not a snapkv_sequence");
  if (path == nullptr) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "path is NULL");
  if (seq->seq->prefilling()) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "the sequence has a pending prefill");
  return guarded(fn, SNAPKV_ERR_IO, [&] {
    snapkv::save_session(*seq->core->engine, *seq->seq, path);
    return SNAPKV_OK;
  });
}

snapkv_status snapkv_session_load(const snapkv_engine* engine, const char* path, const char* cold_dir, int64_t n_ctx,
                                  snapkv_sequence** out) noexcept {
  static constexpr const char* fn = "snapkv_session_load";
  if (!valid(engine)) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "engine is NULL or not a snapkv_engine");
  if (path == nullptr) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "path is NULL");
  if (out == nullptr) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  if (n_ctx < 0) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "n_ctx " + std::to_string(n_ctx) + " is negative");
  // The bound of snapkv_sequence_new, refused as it is there (it came back as an IO error).
  if (n_ctx > (int64_t{1} << 30))
    return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "n_ctx " + std::to_string(n_ctx) + " is above 2^30");
  return guarded(fn, SNAPKV_ERR_IO, [&] {
    snapkv::SessionLoadOptions lo;
    if (cold_dir != nullptr) lo.cold_dir = cold_dir;
    lo.n_ctx = n_ctx;
    auto h = std::make_unique<snapkv_sequence>();
    h->core = engine->core;
    h->seq = snapkv::load_session(*engine->core->engine, path, lo).sequence;
    *out = h.release();
    return SNAPKV_OK;
  });
}

void snapkv_sequence_free(snapkv_sequence* seq) noexcept { snapkv::capi::destroy(seq); }

snapkv_status snapkv_sequence_fork(const snapkv_sequence* seq, snapkv_sequence** out) noexcept {
  static constexpr const char* fn = "snapkv_sequence_fork";
  if (!valid(seq)) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "seq is NULL or not a snapkv_sequence");
  if (out == nullptr) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  return guarded(fn, SNAPKV_ERR_INVALID_ARGUMENT, [&] {
    auto h = std::make_unique<snapkv_sequence>();
    h->core = seq->core;
    h->seq = seq->seq->fork();
    *out = h.release();
    return SNAPKV_OK;
  });
}

snapkv_status snapkv_sequence_reset(snapkv_sequence* seq) noexcept {
  if (!valid(seq))
    return fail(SNAPKV_ERR_INVALID_ARGUMENT, "snapkv_sequence_reset", "seq is NULL or not a snapkv_sequence");
  return guarded("snapkv_sequence_reset", SNAPKV_ERR_INTERNAL, [&] {
    seq->batch.clear();
    seq->seq->reset();
    return SNAPKV_OK;
  });
}

int64_t snapkv_sequence_n_past(const snapkv_sequence* seq) noexcept { return valid(seq) ? seq->seq->n_past() : -1; }
int64_t snapkv_sequence_n_ctx(const snapkv_sequence* seq) noexcept { return valid(seq) ? seq->seq->n_ctx() : -1; }

snapkv_status snapkv_prefill(snapkv_sequence* seq, const int32_t* tokens, size_t n_tokens, const char* press,
                             const float** logits) noexcept {
  return snapkv_prefill_question(seq, tokens, n_tokens, press, 0, logits);
}

snapkv_status snapkv_prefill_question(snapkv_sequence* seq, const int32_t* tokens, size_t n_tokens, const char* press,
                                      size_t n_question_tokens, const float** logits) noexcept {
  const std::string bad_span = n_question_tokens > n_tokens && n_tokens > 0
                                   ? "n_question_tokens " + std::to_string(n_question_tokens) + " exceeds the " +
                                         std::to_string(n_tokens) + " prompt tokens"
                                   : std::string();
  return prefill_call(n_question_tokens > 0 ? "snapkv_prefill_question" : "snapkv_prefill", seq, tokens, n_tokens,
                      logits, bad_span, [&] {
                        snapkv::PrefillOptions po;
                        po.press = parse_press(press);
                        po.question_tokens = static_cast<int64_t>(n_question_tokens);
                        return po;
                      });
}

snapkv_status snapkv_decode(snapkv_sequence* seq, int32_t token, const float** logits) noexcept {
  static constexpr const char* fn = "snapkv_decode";
  if (!valid(seq)) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "seq is NULL or not a snapkv_sequence");
  snapkv::Sequence& s = *seq->seq;
  if (s.n_past() >= s.n_ctx()) return fail(SNAPKV_ERR_CONTEXT_FULL, fn, context_message(s.n_past(), 1, s.n_ctx()));
  return guarded(fn, SNAPKV_ERR_INVALID_ARGUMENT, [&] {
    seq->batch.clear();
    seq->batch.add(s, token, logits != nullptr);
    snapkv::capi::WorkspaceLease ws(*seq->core);
    seq->core->engine->step(seq->batch, ws.get());
    if (logits != nullptr) *logits = seq->batch.logits(0).data();
    return SNAPKV_OK;
  });
}

snapkv_status snapkv_decode_batch(snapkv_sequence* const* seqs, const int32_t* tokens, size_t n, float* logits,
                                  size_t capacity) noexcept {
  static constexpr const char* fn = "snapkv_decode_batch";
  if (seqs == nullptr) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "seqs is NULL");
  if (tokens == nullptr) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "tokens is NULL");
  if (n == 0) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "no rows (n is 0)");
  for (size_t i = 0; i < n; ++i) {
    if (!valid(seqs[i]))
      return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "seqs[" + std::to_string(i) + "] is NULL or not a snapkv_sequence");
    if (seqs[i]->core != seqs[0]->core)
      return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn,
                  "seqs[" + std::to_string(i) + "] belongs to another engine than seqs[0]");
  }
  snapkv::capi::EngineCore& core = *seqs[0]->core;
  const auto n_vocab = static_cast<size_t>(core.engine->info().n_vocab);
  if (logits != nullptr && (n > capacity / n_vocab))
    return fail(SNAPKV_ERR_BUFFER_TOO_SMALL, fn,
                "logits buffer of " + std::to_string(capacity) + " floats is too small: " + std::to_string(n) +
                    " rows x " + std::to_string(n_vocab) + " needed");
  // Context: a run of k rows of one sequence needs k free positions.
  for (size_t i = 0, run = 0; i < n; ++i) {
    run = (i > 0 && seqs[i] == seqs[i - 1]) ? run + 1 : 0;
    const snapkv::Sequence& s = *seqs[i]->seq;
    if (s.n_past() + static_cast<int64_t>(run) >= s.n_ctx())
      return fail(SNAPKV_ERR_CONTEXT_FULL, fn,
                  "row " + std::to_string(i) + ": " + context_message(s.n_past(), run + 1, s.n_ctx()));
  }
  return guarded(fn, SNAPKV_ERR_INVALID_ARGUMENT, [&] {
    snapkv::Batch batch;
    for (size_t i = 0; i < n; ++i) batch.add(*seqs[i]->seq, tokens[i], logits != nullptr);
    snapkv::capi::WorkspaceLease ws(core);
    core.engine->step(batch, ws.get());
    if (logits != nullptr)
      for (size_t i = 0; i < n; ++i) {
        const std::span<const float> l = batch.logits(static_cast<int>(i));
        std::copy(l.begin(), l.end(), logits + i * n_vocab);
      }
    return SNAPKV_OK;
  });
}

snapkv_status snapkv_sequence_stats(const snapkv_sequence* seq, snapkv_stats* out) noexcept {
  static constexpr const char* fn = "snapkv_sequence_stats";
  if (!valid(seq)) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "seq is NULL or not a snapkv_sequence");
  if (out == nullptr) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  const snapkv::Sequence& s = *seq->seq;
  const snapkv::SequenceStats& st = s.stats();
  snapkv_stats r{};
  r.n_past = s.n_past();
  r.n_ctx = s.n_ctx();
  r.kv_cache_bytes = st.kv_cache_bytes;
  r.kv_cache_bytes_full = st.kv_cache_bytes_full;
  r.peak_kv_cache_bytes = st.peak_kv_cache_bytes;
  r.compressed = st.compressed ? 1 : 0;
  r.budget = st.budget;
  r.n_prompt_tokens = st.n_prompt_tokens;
  r.prefill_ms = st.prefill_ms;
  r.compression_ms = st.compression_ms;
  r.press = st.press.c_str();
  r.compression_note = st.compression_note.c_str();
  r.window = st.window;
  r.kv_cold_bytes = st.kv_cold_bytes;
  r.n_reselections = st.n_reselections;
  r.reselect_ms = st.reselect_ms;
  *out = r;
  return SNAPKV_OK;
}

snapkv_generate_params snapkv_generate_params_default(void) noexcept {
  const snapkv::GenerateOptions d;
  snapkv_generate_params p{};
  p.n_predict = d.n_predict;
  p.temp = d.sampling.temp;
  p.top_k = d.sampling.top_k;
  p.top_p = d.sampling.top_p;
  p.seed = d.sampling.seed;
  p.ignore_eos = 0;
  p.press = nullptr;
  p.stop = nullptr;
  p.n_stop = 0;
  p.question = nullptr;
  p.n_question = 0;
  p.prompt_question_tokens = 0;
  return p;
}

snapkv_status snapkv_generate(snapkv_sequence* seq, const int32_t* prompt, size_t n_prompt,
                              const snapkv_generate_params* params, snapkv_token_callback cb, void* user,
                              snapkv_generate_result* result) noexcept {
  static constexpr const char* fn = "snapkv_generate";
  if (!valid(seq)) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "seq is NULL or not a snapkv_sequence");
  if (prompt == nullptr) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "prompt is NULL");
  if (n_prompt == 0) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "no prompt tokens (n_prompt is 0)");
  const snapkv_generate_params p = params != nullptr ? *params : snapkv_generate_params_default();
  if (p.question == nullptr && p.n_question > 0)
    return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "params->question is NULL but n_question > 0");
  if (p.prompt_question_tokens > n_prompt)
    return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn,
                "params->prompt_question_tokens " + std::to_string(p.prompt_question_tokens) + " exceeds n_prompt " +
                    std::to_string(n_prompt));
  if (p.stop == nullptr && p.n_stop > 0)
    return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "params->stop is NULL but n_stop > 0");
  for (size_t i = 0; i < p.n_stop; ++i)
    if (p.stop[i] == nullptr)
      return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "params->stop[" + std::to_string(i) + "] is NULL");
  snapkv::Sequence& s = *seq->seq;
  if (s.n_past() != 0)
    return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "the sequence must be empty (snapkv_sequence_reset it first)");
  if (n_prompt > static_cast<size_t>(s.n_ctx()) || p.n_question > static_cast<size_t>(s.n_ctx()) - n_prompt)
    return fail(SNAPKV_ERR_CONTEXT_FULL, fn,
                "a prompt of " + std::to_string(n_prompt) + " tokens and a question of " +
                    std::to_string(p.n_question) + " tokens do not fit the context of " + std::to_string(s.n_ctx()) +
                    " tokens");
  return guarded(fn, SNAPKV_ERR_INVALID_ARGUMENT, [&] {
    snapkv::GenerateOptions o;
    o.n_predict = p.n_predict;
    o.sampling.temp = p.temp;
    o.sampling.top_k = p.top_k;
    o.sampling.top_p = p.top_p;
    o.sampling.seed = p.seed;
    o.ignore_eos = p.ignore_eos != 0;
    o.press = parse_press(p.press);
    o.question_tokens = static_cast<int64_t>(p.prompt_question_tokens);
    for (size_t i = 0; i < p.n_stop; ++i) o.stop.emplace_back(p.stop[i]);
    if (cb != nullptr)
      o.on_token = [cb, user](int32_t token, std::string_view text) {
        return cb(user, token, text.empty() ? "" : text.data(), text.size()) == 0;
      };
    seq->batch.clear();
    snapkv::capi::WorkspaceLease ws(*seq->core);
    const std::span<const int32_t> question =
        p.n_question > 0 ? std::span<const int32_t>(p.question, p.n_question) : std::span<const int32_t>();
    const snapkv::GenerateResult r =
        snapkv::generate(*seq->core->engine, s, std::span<const int32_t>(prompt, n_prompt), question, o, ws.get());
    if (result != nullptr) {
      snapkv_generate_result c{};
      c.n_tokens = static_cast<int64_t>(r.tokens.size());
      c.stop_reason = to_c(r.stop_reason);
      c.n_prompt_tokens = r.n_context_tokens + r.n_question_tokens;
      c.n_decode_steps = r.n_decode_steps;
      c.ttft_ms = r.ttft_ms;
      c.prefill_ms = r.prefill_ms;
      c.prefill_tokens_per_s = r.prefill_tokens_per_s;
      c.decode_ms = r.decode_ms;
      c.decode_tokens_per_s = r.decode_tokens_per_s;
      *result = c;
    }
    return SNAPKV_OK;
  });
}

}  // extern "C"
