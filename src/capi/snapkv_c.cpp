// snapkv C API: errors, version, engine, tokenizer, sampler (see snapkv/snapkv_c.h).
// Every entry point checks its pointers and runs its body inside capi::guarded(), so no C++
// exception crosses the C boundary.
#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <string>

#include "capi/capi_impl.h"
#include "snapkv/tokenizer.h"

#ifndef SNAPKV_VERSION_STRING
#error "SNAPKV_VERSION_STRING must be defined by the build"
#endif

namespace snapkv::capi {

namespace {
thread_local std::string t_last_error;
}  // namespace

snapkv_status fail(snapkv_status status, const char* fn, const std::string& msg) noexcept {
  try {
    t_last_error.assign(fn);
    t_last_error += ": ";
    t_last_error += msg;
  } catch (...) {
    t_last_error.clear();  // no memory for the message: the status still says what happened
  }
  return status;
}

namespace {

/// The engine's tokenizer, or an Error for an engine whose GGUF has none.
const Tokenizer& tokenizer_of(const snapkv_engine* e) { return e->core->engine->tokenizer(); }

/// Copies `bytes` and a NUL into buf (capacity >= size + 1), or reports the size needed.
snapkv_status copy_text(const char* fn, const std::string& bytes, char* buf, size_t capacity, size_t* len) {
  *len = bytes.size();
  if (capacity < bytes.size() + 1)
    return fail(SNAPKV_ERR_BUFFER_TOO_SMALL, fn,
                "buffer of " + std::to_string(capacity) + " bytes is too small: " + std::to_string(bytes.size() + 1) +
                    " needed (text and NUL)");
  std::memcpy(buf, bytes.data(), bytes.size());
  buf[bytes.size()] = '\0';
  return SNAPKV_OK;
}

}  // namespace

namespace {

// Helpers of snapkv_engine_load(_ex) (C++ linkage: outside the extern "C" block).

std::optional<snapkv::PrefillAttention> prefill_attention_of(snapkv_prefill_attention a) {
  switch (a) {
    case SNAPKV_PREFILL_EXACT:
      return snapkv::PrefillAttention::Exact;
    case SNAPKV_PREFILL_BF16:
      return snapkv::PrefillAttention::BF16;
    case SNAPKV_PREFILL_INT8:
      return snapkv::PrefillAttention::Int8;
  }
  return std::nullopt;
}

snapkv_status engine_load(const char* fn, const char* path, int32_t n_threads, snapkv_prefill_attention prefill,
                          snapkv_engine** out) {
  if (out == nullptr) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  if (path == nullptr) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "path is NULL");
  if (n_threads < 0 || n_threads > 4096)
    return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn,
                "n_threads " + std::to_string(n_threads) + " must be in [0, 4096] (0: all cores)");
  const auto pa = prefill_attention_of(prefill);
  if (!pa)
    return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn,
                "prefill_attention " + std::to_string(static_cast<int>(prefill)) + " is unknown");
  if (!snapkv::prefill_attention_supported(*pa))
    return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn,
                std::string("prefill_attention ") + snapkv::prefill_attention_name(*pa) +
                    " is not supported by this library and CPU (" +
                    (*pa == snapkv::PrefillAttention::Int8 ? "it needs AVX2" : "it needs AVX512-BF16") + ")");
  return guarded(fn, SNAPKV_ERR_IO, [&] {
    snapkv::EngineOptions opt;
    opt.n_threads = n_threads;
    opt.prefill_attention = *pa;
    auto core = std::make_shared<snapkv::capi::EngineCore>();
    core->engine = snapkv::Engine::load(path, opt);
    auto h = std::make_unique<snapkv_engine>();
    h->core = std::move(core);
    *out = h.release();
    return SNAPKV_OK;
  });
}

}  // namespace

}  // namespace snapkv::capi

using snapkv::capi::copy_text;
using snapkv::capi::engine_load;
using snapkv::capi::fail;
using snapkv::capi::guarded;
using snapkv::capi::prefill_attention_of;
using snapkv::capi::tokenizer_of;
using snapkv::capi::valid;

extern "C" {

const char* snapkv_version(void) noexcept { return SNAPKV_VERSION_STRING; }

const char* snapkv_status_name(snapkv_status status) noexcept {
  switch (snapkv::capi::enum_value(status)) {
    case SNAPKV_OK:
      return "ok";
    case SNAPKV_ERR_INVALID_ARGUMENT:
      return "invalid_argument";
    case SNAPKV_ERR_IO:
      return "io";
    case SNAPKV_ERR_OUT_OF_MEMORY:
      return "out_of_memory";
    case SNAPKV_ERR_CONTEXT_FULL:
      return "context_full";
    case SNAPKV_ERR_BUFFER_TOO_SMALL:
      return "buffer_too_small";
    case SNAPKV_ERR_INTERNAL:
      return "internal";
  }
  return "unknown";
}

const char* snapkv_stop_reason_name(snapkv_stop_reason reason) noexcept {
  switch (snapkv::capi::enum_value(reason)) {
    case SNAPKV_STOP_EOS:
      return "eos";
    case SNAPKV_STOP_N_PREDICT:
      return "n_predict";
    case SNAPKV_STOP_CONTEXT_FULL:
      return "context_full";
    case SNAPKV_STOP_STRING:
      return "stop";
    case SNAPKV_STOP_CANCELLED:
      return "cancelled";
  }
  return "unknown";
}

const char* snapkv_last_error(void) noexcept { return snapkv::capi::t_last_error.c_str(); }

snapkv_status snapkv_engine_load(const char* path, int32_t n_threads, snapkv_engine** out) noexcept {
  return engine_load("snapkv_engine_load", path, n_threads, SNAPKV_PREFILL_EXACT, out);
}

snapkv_status snapkv_engine_load_ex(const char* path, int32_t n_threads, snapkv_prefill_attention prefill_attention,
                                    snapkv_engine** out) noexcept {
  return engine_load("snapkv_engine_load_ex", path, n_threads, prefill_attention, out);
}

int32_t snapkv_prefill_attention_supported(snapkv_prefill_attention prefill_attention) noexcept {
  const auto pa = prefill_attention_of(prefill_attention);
  return pa && snapkv::prefill_attention_supported(*pa) ? 1 : 0;
}

void snapkv_engine_free(snapkv_engine* engine) noexcept { snapkv::capi::destroy(engine); }

snapkv_status snapkv_engine_info(const snapkv_engine* engine, snapkv_model_info* out) noexcept {
  static constexpr const char* fn = "snapkv_engine_info";
  if (!valid(engine)) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "engine is NULL or not a snapkv_engine");
  if (out == nullptr) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  const snapkv::Engine& e = *engine->core->engine;
  const snapkv::ModelInfo& i = e.info();
  snapkv_model_info r{};
  r.path = i.path.c_str();
  r.arch = i.arch.c_str();
  r.name = i.name.c_str();
  r.n_layer = i.n_layer;
  r.n_embd = i.n_embd;
  r.n_head = i.n_head;
  r.n_head_kv = i.n_head_kv;
  r.head_dim = i.head_dim;
  r.n_vocab = i.n_vocab;
  r.n_ctx_train = i.n_ctx_train;
  r.weight_bytes = i.weight_bytes;
  r.n_threads = e.n_threads();
  r.has_tokenizer = e.has_tokenizer() ? 1 : 0;
  r.bos = e.has_tokenizer() ? e.tokenizer().bos() : -1;
  r.eos = e.has_tokenizer() ? e.tokenizer().eos() : -1;
  *out = r;
  return SNAPKV_OK;
}

snapkv_status snapkv_tokenize(const snapkv_engine* engine, const char* text, size_t len, int add_special,
                              int parse_special, int32_t* tokens, size_t capacity, size_t* n_tokens) noexcept {
  static constexpr const char* fn = "snapkv_tokenize";
  if (!valid(engine)) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "engine is NULL or not a snapkv_engine");
  if (n_tokens == nullptr) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "n_tokens is NULL");
  if (text == nullptr && len > 0) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "text is NULL but len > 0");
  if (tokens == nullptr && capacity > 0)
    return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "tokens is NULL but capacity > 0");
  return guarded(fn, SNAPKV_ERR_INVALID_ARGUMENT, [&] {
    const std::string_view s = len > 0 ? std::string_view(text, len) : std::string_view();
    const std::vector<int32_t> ids = tokenizer_of(engine).encode(s, add_special != 0, parse_special != 0);
    *n_tokens = ids.size();
    if (ids.size() > capacity)
      return fail(
          SNAPKV_ERR_BUFFER_TOO_SMALL, fn,
          "buffer of " + std::to_string(capacity) + " tokens is too small: " + std::to_string(ids.size()) + " needed");
    std::copy(ids.begin(), ids.end(), tokens);
    return SNAPKV_OK;
  });
}

snapkv_status snapkv_token_to_piece(const snapkv_engine* engine, int32_t token, int render_special, char* buf,
                                    size_t capacity, size_t* len) noexcept {
  static constexpr const char* fn = "snapkv_token_to_piece";
  if (!valid(engine)) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "engine is NULL or not a snapkv_engine");
  if (len == nullptr) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "len is NULL");
  if (buf == nullptr && capacity > 0) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "buf is NULL but capacity > 0");
  return guarded(fn, SNAPKV_ERR_INVALID_ARGUMENT, [&] {
    return copy_text(fn, tokenizer_of(engine).token_to_piece(token, render_special != 0), buf, capacity, len);
  });
}

snapkv_status snapkv_detokenize(const snapkv_engine* engine, const int32_t* tokens, size_t n_tokens, int render_special,
                                char* buf, size_t capacity, size_t* len) noexcept {
  static constexpr const char* fn = "snapkv_detokenize";
  if (!valid(engine)) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "engine is NULL or not a snapkv_engine");
  if (len == nullptr) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "len is NULL");
  if (tokens == nullptr && n_tokens > 0)
    return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "tokens is NULL but n_tokens > 0");
  if (buf == nullptr && capacity > 0) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "buf is NULL but capacity > 0");
  return guarded(fn, SNAPKV_ERR_INVALID_ARGUMENT, [&] {
    const snapkv::Tokenizer& tok = tokenizer_of(engine);
    const std::span<const int32_t> ids(tokens, n_tokens);
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] < 0 || ids[i] >= tok.n_vocab())
        return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn,
                    "token id " + std::to_string(ids[i]) + " at index " + std::to_string(i) +
                        " is outside the vocabulary [0, " + std::to_string(tok.n_vocab()) + ")");
    return copy_text(fn, tok.decode(ids, render_special != 0), buf, capacity, len);
  });
}

snapkv_status snapkv_token_is_eog(const snapkv_engine* engine, int32_t token, int* is_eog) noexcept {
  static constexpr const char* fn = "snapkv_token_is_eog";
  if (!valid(engine)) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "engine is NULL or not a snapkv_engine");
  if (is_eog == nullptr) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "is_eog is NULL");
  return guarded(fn, SNAPKV_ERR_INVALID_ARGUMENT, [&] {
    const snapkv::Tokenizer& tok = tokenizer_of(engine);
    if (token < 0 || token >= tok.n_vocab())
      return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn,
                  "token id " + std::to_string(token) + " is outside the vocabulary [0, " +
                      std::to_string(tok.n_vocab()) + ")");
    *is_eog = tok.is_eog(token) ? 1 : 0;
    return SNAPKV_OK;
  });
}

snapkv_status snapkv_sampler_new(float temp, int32_t top_k, float top_p, uint64_t seed, snapkv_sampler** out) noexcept {
  static constexpr const char* fn = "snapkv_sampler_new";
  if (out == nullptr) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  return guarded(fn, SNAPKV_ERR_INVALID_ARGUMENT, [&] {
    snapkv::SamplerOptions o;
    o.temp = temp;
    o.top_k = top_k;
    o.top_p = top_p;
    o.seed = seed;
    *out = new snapkv_sampler(o);
    return SNAPKV_OK;
  });
}

void snapkv_sampler_free(snapkv_sampler* sampler) noexcept { snapkv::capi::destroy(sampler); }

snapkv_status snapkv_sampler_sample(snapkv_sampler* sampler, const float* logits, size_t n_logits,
                                    int32_t* token) noexcept {
  static constexpr const char* fn = "snapkv_sampler_sample";
  if (!valid(sampler)) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "sampler is NULL or not a snapkv_sampler");
  if (logits == nullptr) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "logits is NULL");
  if (token == nullptr) return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "token is NULL");
  if (n_logits == 0 || n_logits > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    return fail(SNAPKV_ERR_INVALID_ARGUMENT, fn, "n_logits " + std::to_string(n_logits) + " must be in [1, 2^31)");
  return guarded(fn, SNAPKV_ERR_INVALID_ARGUMENT, [&] {
    *token = sampler->sampler.sample(std::span<const float>(logits, n_logits));
    return SNAPKV_OK;
  });
}

}  // extern "C"
