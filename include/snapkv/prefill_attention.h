// snapkv: arithmetic of the prefill attention kernel (several queries at once).
#pragma once

#include <optional>
#include <string_view>

namespace snapkv {

/// How prefill attention (a call with two or more queries) computes Q K^T and P V:
///  - Exact: f32 products and sums; with an F16 cache the arithmetic of ggml's non-flash CPU path
///    (queries and probabilities rounded to F16), so llama.cpp's golden outputs hold. The default.
///  - BF16: queries (pre-scaled), keys, probabilities and values rounded to bfloat16 (8-bit
///    significand, round-to-nearest-even) and multiplied with AVX512-BF16 dot products
///    (vdpbf16ps: two products added into each f32 lane), f32 accumulation and an online softmax
///    in f32 (Dao et al. 2022, FlashAttention, Alg. 1). About twice the FMA rate of f32 on CPUs
///    that have it; the logits move by the rounding (measured: docs/quality.md). Needs a CPU and
///    build with AVX512-BF16 (prefill_attention_supported) and head_dim % 32 == 0; other shapes
///    use Exact. Decode (one query per sequence) is always Exact.
enum class PrefillAttention { Exact, BF16 };

/// "exact" or "bf16" (the names of `snapkv --prefill-attn`).
inline const char* prefill_attention_name(PrefillAttention a) { return a == PrefillAttention::BF16 ? "bf16" : "exact"; }

/// The PrefillAttention named `name`, or nullopt for any other string.
inline std::optional<PrefillAttention> prefill_attention_from_name(std::string_view name) {
  if (name == "exact") return PrefillAttention::Exact;
  if (name == "bf16") return PrefillAttention::BF16;
  return std::nullopt;
}

/// Whether this build of the library runs PrefillAttention `a` (BF16: compiled with AVX512-BF16,
/// i.e. built on and for a CPU that has it; Exact: always).
bool prefill_attention_supported(PrefillAttention a);

}  // namespace snapkv
