// Causal attention over the ragged per-head KV cache (see attention/attention.h).
#include "attention/attention.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <span>

#include "attention/amx.h"
#include "attention/decode.h"
#include "attention/int8_dot.h"
#include "attention/prefill.h"
#include "attention/prefill_bf16.h"
#include "attention/prefill_int8.h"
#include "attention/simd.h"
#include "snapkv/error.h"

namespace snapkv {

bool prefill_attention_supported(PrefillAttention a) {
  if (a == PrefillAttention::Exact) return true;
  // Int8: compiled with AVX2 (a binary built with it runs only on CPUs that have it).
  if (a == PrefillAttention::Int8) return attn::kHaveInt8Prefill;
  // BF16: compiled in, and the CPU running this has it (a binary built elsewhere may not).
  return a == PrefillAttention::BF16 && attn::kHaveBF16Prefill && attn::cpu_has_bf16();
}

const char* prefill_attention_isa(PrefillAttention a, int head_dim) {
  if (a == PrefillAttention::Exact) return "f32";
  if (!prefill_attention_supported(a)) return "unsupported";
  if (a == PrefillAttention::Int8)
    return attn::int8_prefill_shape(AttentionParams{.n_head = 1, .n_head_kv = 1, .head_dim = head_dim})
               ? attn::kInt8PrefillIsa
               : "f32";
  if (head_dim % 32 != 0) return "f32";  // bf16_prefill_shape(): such shapes run the exact kernel
  return attn::amx_usable() ? "amx-bf16" : "avx512-bf16";
}

AttentionWorkspace::AttentionWorkspace(const AttentionParams& shape, int64_t max_queries, PrefillAttention prefill)
    : max_queries_(max_queries), prefill_(prefill) {
  if (prefill != PrefillAttention::Exact && prefill != PrefillAttention::BF16 && prefill != PrefillAttention::Int8)
    throw Error(fmt::format("attention: unknown prefill attention {}", static_cast<int>(prefill)));
  if (!prefill_attention_supported(prefill))
    throw Error(
        fmt::format("attention: prefill attention '{}' needs a CPU and build with {}; this build or CPU "
                    "lacks it (use 'exact')",
                    prefill_attention_name(prefill), prefill == PrefillAttention::Int8 ? "AVX2" : "AVX512-BF16"));
  if (shape.n_head < 1 || shape.n_head_kv < 1 || shape.head_dim < 1 || shape.n_head % shape.n_head_kv != 0)
    throw Error(fmt::format("attention: bad shape n_head {} n_head_kv {} head_dim {}", shape.n_head, shape.n_head_kv,
                            shape.head_dim));
  if (max_queries < 1) throw Error(fmt::format("attention: bad workspace size max_queries {}", max_queries));
  decode_ = std::make_unique<DecodeWorkspace>(shape, 1);
  q16_.resize(static_cast<size_t>(max_queries) * static_cast<size_t>(shape.n_head) *
              static_cast<size_t>(shape.head_dim));
  thread_floats_ = attn::prefill_thread_floats(shape);
}

AttentionWorkspace::~AttentionWorkspace() = default;

size_t AttentionWorkspace::bytes() const {
  return decode_->bytes() + sizeof(float) * (q16_.size() + thread_.size() + bf16_thread_.size() + score_cache_.size()) +
         sizeof(double) * thread_sums_.size() + sizeof(const float*) * thread_rows_.size() + int8_keys_.size();
}

void attention(const AttentionParams& p, const float* q, const int32_t* q_pos, int64_t n_q, const KVLayerCache& cache,
               float* out, AttentionWorkspace& ws, int n_threads) {
  if (n_threads < 1) throw Error(fmt::format("attention: thread count {} must be >= 1", n_threads));
  if (static_cast<int>(cache.heads.size()) != p.n_head_kv || p.n_head_kv < 1 || p.n_head % p.n_head_kv != 0)
    throw Error(fmt::format("attention: cache has {} heads, expected n_head_kv {} (n_head {})", cache.heads.size(),
                            p.n_head_kv, p.n_head));
  if (n_q < 1) return;
  if (n_q > ws.max_queries_)
    throw Error(fmt::format("attention: {} queries exceed the workspace's {}", n_q, ws.max_queries_));
  for (const auto& hc : cache.heads) {
    if (hc.head_dim() != p.head_dim)
      throw Error(fmt::format("attention: cache head_dim {} != {}", hc.head_dim(), p.head_dim));
    if (hc.k_type() != cache.heads[0].k_type() || hc.v_type() != cache.heads[0].v_type())
      throw Error(fmt::format("attention: cache heads of types {}/{} and {}/{} in one layer", kv_type_name(hc.k_type()),
                              kv_type_name(hc.v_type()), kv_type_name(cache.heads[0].k_type()),
                              kv_type_name(cache.heads[0].v_type())));
  }

  if (n_q == 1) {
    // Decode: the split-K kernel with one row.
    const DecodeQuery row{q, q_pos[0], &cache, out};
    attention_decode(p, std::span<const DecodeQuery>(&row, 1), *ws.decode_, n_threads);
    return;
  }

  const auto threads = static_cast<size_t>(n_threads);
  if (ws.prefill_ == PrefillAttention::BF16 && attn::bf16_prefill_shape(p)) {
    const size_t tf = attn::prefill_bf16_thread_floats(p);  // a multiple of 16 floats (64 bytes)
    if (ws.bf16_thread_.size() < threads * tf + 16) ws.bf16_thread_.resize(threads * tf + 16);
    // 64-byte aligned thread buffers: every vector load and store of the kernel stays in one line.
    float* base = ws.bf16_thread_.data();
    base += (16 - (reinterpret_cast<uintptr_t>(base) / sizeof(float)) % 16) % 16;
    attn::attention_prefill_bf16(p, q, q_pos, n_q, cache, out, base, n_threads);
    return;
  }

  if (ws.prefill_ == PrefillAttention::Int8 && attn::int8_prefill_shape(p)) {
    const size_t tf = attn::prefill_int8_thread_floats(p);  // a multiple of 8 floats (32 bytes)
    if (ws.bf16_thread_.size() < threads * tf + 8) ws.bf16_thread_.resize(threads * tf + 8);
    float* base = ws.bf16_thread_.data();
    base += (8 - (reinterpret_cast<uintptr_t>(base) / sizeof(float)) % 8) % 8;
    // The keys' int8 copy, 32-byte aligned; grows with the cache.
    const size_t kb = attn::prefill_int8_key_bytes(p, cache);
    if (ws.int8_keys_.size() < kb + 32) ws.int8_keys_.resize(kb + 32);
    uint8_t* keys = ws.int8_keys_.data();
    keys += (32 - reinterpret_cast<uintptr_t>(keys) % 32) % 32;
    attn::attention_prefill_int8(p, q, q_pos, n_q, cache, out, base, keys, n_threads);
    return;
  }

  const int hd = p.head_dim;
  const bool f16 = cache.heads[0].k_type() == KVType::F16;  // kv_types_combine: values F16 too
  const size_t q_floats = static_cast<size_t>(n_q) * static_cast<size_t>(p.n_head) * static_cast<size_t>(hd);
  if (q_floats > ws.q16_.size()) throw Error("attention: query buffer of the workspace too small");

  // ggml converts the f32 operand of an F16 mat-mul to F16: round the queries the same way.
  const float* qa = q;
  if (f16) {
    float* q16 = ws.q16_.data();
    attn::round_f16_row(q, q16, static_cast<int64_t>(q_floats));
    qa = q16;
  }

  const size_t rows = attn::prefill_block_rows(p);
  if (ws.thread_.size() < threads * ws.thread_floats_) ws.thread_.resize(threads * ws.thread_floats_);
  if (ws.thread_sums_.size() < threads * rows * attn::kSumsPerRow)
    ws.thread_sums_.resize(threads * rows * attn::kSumsPerRow);
  if (ws.thread_rows_.size() < threads * rows) ws.thread_rows_.resize(threads * rows);
  // Scores kept between the two passes of an F16 cache: one row per query row, as long as the
  // longest head (a task's visible key range never exceeds it), capped.
  int64_t score_keys = 0;
  if (f16) {
    for (const auto& hc : cache.heads) score_keys = std::max(score_keys, hc.size());
    score_keys = std::min(score_keys, attn::kScoreCacheMaxKeys);
    // Row stride = 16 floats past a multiple of 1024 (4 KiB): rows a power of two apart (4096 keys)
    // would all map to the same L1 sets. Measured alone on Zen 4 (PrefillAttn, 1 thread, 3 rounds):
    // without it 0.90-1.04x, within this VM's noise except SmolLM2 at 16K keys (0.90x); kept, as
    // it costs < 1040 floats per row. The extra capacity is usable: a task is cached while its span
    // fits the stride.
    score_keys = (score_keys + 1023) / 1024 * 1024 + 16;
    if (ws.score_cache_.size() < threads * rows * static_cast<size_t>(score_keys))
      ws.score_cache_.resize(threads * rows * static_cast<size_t>(score_keys));
  }
  attn::attention_prefill(p, qa, q_pos, n_q, cache, out, ws.thread_.data(), ws.thread_floats_, ws.thread_sums_.data(),
                          ws.thread_rows_.data(), ws.score_cache_.data(), score_keys, n_threads);
}

}  // namespace snapkv
