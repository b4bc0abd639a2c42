// Internal: the int8 dot-product step of the INT8 prefill attention (prefill_int8.cpp): per int32
// lane, acc + the sum of 4 products of unsigned 8-bit by signed 8-bit values. AVX2 does it in
// three instructions (vpmaddubsw to int16 pairs, vpmaddwd by ones to int32, vpaddd); AVX512-VNNI
// (with AVX512VL, 256-bit registers) and AVX-VNNI do it in one, vpdpbusd (Intel SDM, "VPDPBUSD").
// The kernel's operands keep every product pair within int16 (|u| <= 127, |s| <= 127: at most
// 2 x 127 x 127 = 32,258, so vpmaddubsw never saturates) and every int32 sum far from overflow,
// so all forms give the same integers, and the kernel the same bits, on every CPU.
#pragma once

#include <cstdint>

#include "attention/simd.h"

namespace snapkv::attn {

/// What runs the INT8 prefill's products in this build, as prefill_attention_isa reports it:
/// "avx512vnni-int8", "avxvnni-int8", "avx2-int8", or "unsupported" without AVX2. It names the
/// extension the build targets: where a CPU has both VNNI forms (Sapphire Rapids, Zen 5) GCC may
/// emit the VEX encoding of the same instruction.
#if SNAPKV_ATTN_AVX2 && defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define SNAPKV_INT8_DOT_VNNI 1
inline constexpr const char* kInt8PrefillIsa = "avx512vnni-int8";
#elif SNAPKV_ATTN_AVX2 && defined(__AVXVNNI__)
#define SNAPKV_INT8_DOT_VNNI 1
inline constexpr const char* kInt8PrefillIsa = "avxvnni-int8";
#elif SNAPKV_ATTN_AVX2
inline constexpr const char* kInt8PrefillIsa = "avx2-int8";
#else
inline constexpr const char* kInt8PrefillIsa = "unsupported";
#endif

#if SNAPKV_ATTN_AVX2

/// AVX2 form: acc[i] + sum_{k<4} u[4i+k] x s[4i+k] per int32 lane i (u unsigned, s signed bytes;
/// exact while each pair u[2m] s[2m] + u[2m+1] s[2m+1] fits in int16).
inline __m256i int8_dot4_avx2(__m256i acc, __m256i u, __m256i s) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
}

#if SNAPKV_INT8_DOT_VNNI
/// VNNI form of int8_dot4_avx2 (vpdpbusd: no int16 step, so exact for any bytes).
inline __m256i int8_dot4_vnni(__m256i acc, __m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(acc, u, s);
#else
  return _mm256_dpbusd_avx_epi32(acc, u, s);
#endif
}
#endif

/// The form this build uses (kInt8PrefillIsa).
inline __m256i int8_dot4(__m256i acc, __m256i u, __m256i s) {
#if SNAPKV_INT8_DOT_VNNI
  return int8_dot4_vnni(acc, u, s);
#else
  return int8_dot4_avx2(acc, u, s);
#endif
}

#endif  // SNAPKV_ATTN_AVX2

}  // namespace snapkv::attn
