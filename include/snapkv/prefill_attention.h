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
///    in f32 (Dao et al. 2022, FlashAttention, Alg. 1). On Zen 4, vdpbf16ps runs at twice the f32
///    FMA rate (bench_kernels Bf16DotPeak vs FmaPeak) and prefill is 1.4-2.8x faster; the logits
///    move by the rounding (KL 0.004-0.007 nats vs Exact: docs/quality.md, "BF16 prefill
///    attention"). Needs a CPU and build with AVX512-BF16 (prefill_attention_supported) and
///    head_dim % 32 == 0; other shapes run Exact. Where the build and CPU have AMX-BF16 and Linux
///    grants the tile state, the same products run on AMX tiles (tdpbf16ps, 16 x 16 x 32 per
///    instruction; TTFT 2.6x faster than on vectors for a 16K prompt of a SmolLM2-shaped model,
///    2 threads, Intel Xeon: docs/benchmarks.md, "AMX tiles for the BF16 prefill"); the
///    environment variable SNAPKV_AMX=0 turns that off.
///  - Int8: Q K^T and P V in int8 (after SageAttention, Zhang et al. 2025, arXiv 2410.02367,
///    which quantizes Q K^T to int8): query rows (pre-scaled) and key rows quantized symmetrically
///    to int8 with one f32 scale per 32 dims, value rows with one per row (the largest magnitude
///    at 127); the softmax weights p_j x scale_v_j quantized to 7 bits per row and block of 64
///    keys; integer dot products exact in int32 (AVX2 vpmaddubsw / vpmaddwd) times the scales;
///    online softmax in f32. For CPUs without AVX512-BF16: on Zen 3 the int8 dot steps run at
///    1.1-1.5x the f32 FMA rate (bench_kernels Int8DotPeak vs FmaPeak; the ratio moved between
///    hosts of that kind), need no horizontal sums in this layout, and prefill attention runs
///    1.7-2.1x faster than Exact. The logits move by the rounding (docs/quality.md, "INT8
///    prefill attention"). Needs a build with AVX2
///    (prefill_attention_supported) and head_dim % 32 == 0 (at most 512); other shapes run Exact.
///    Decode (one query per sequence) is always Exact.
enum class PrefillAttention { Exact, BF16, Int8 };

/// "exact", "bf16" or "int8" (the names of `snapkv --prefill-attn`).
inline const char* prefill_attention_name(PrefillAttention a) {
  return a == PrefillAttention::BF16 ? "bf16" : a == PrefillAttention::Int8 ? "int8" : "exact";
}

/// The PrefillAttention named `name`, or nullopt for any other string.
inline std::optional<PrefillAttention> prefill_attention_from_name(std::string_view name) {
  if (name == "exact") return PrefillAttention::Exact;
  if (name == "bf16") return PrefillAttention::BF16;
  if (name == "int8") return PrefillAttention::Int8;
  return std::nullopt;
}

/// The instructions that run PrefillAttention `a`'s products for a model with this head_dim in
/// this process: "amx-bf16" (AMX tiles), "avx512-bf16" (vdpbf16ps vectors), "avx2-int8" (Int8
/// with vpmaddubsw), "avx512vnni-int8" / "avxvnni-int8" (Int8 with vpdpbusd, in a build for a CPU
/// with AVX512-VNNI or AVX-VNNI; the same results), "f32" (Exact, or BF16 / Int8 with a head_dim they do not take: f32
/// FMAs), or "unsupported" (BF16 or Int8 where prefill_attention_supported() is false, or an unknown value). For
/// reports and benchmarks.
const char* prefill_attention_isa(PrefillAttention a, int head_dim);

/// Whether this build of the library runs PrefillAttention `a` on this CPU (BF16: compiled with
/// AVX512-BF16 and the CPU has it; Int8: compiled with AVX2; Exact: always; any other value:
/// false).
bool prefill_attention_supported(PrefillAttention a);

}  // namespace snapkv
