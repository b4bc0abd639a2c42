// snapkv: compile-time ISA selection for the kernels and a few integer-dot helpers.
// Levels (chosen by the -march flags of the build):
//   SNAPKV_VNNI  : AVX-512 F/BW/VL + VNNI on 256-bit vectors (vpdpbusd, vpdpwssd)
//   SNAPKV_AVX2  : AVX2 + FMA + F16C (vpmaddubsw / vpmaddwd), also set when SNAPKV_VNNI is
//   (neither)    : portable scalar code
// SNAPKV_AVX512F marks AVX-512F for the f32/f16 kernels (16-wide FMA).
#pragma once

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define SNAPKV_AVX2 1
#include <immintrin.h>
#endif
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
// GCC 12 warns about the deliberately undefined register inside its own AVX-512 intrinsics
// (_mm512_undefined_*; GCC bug 105593). Silence that false positive for the kernel files.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#if defined(SNAPKV_AVX2) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512VNNI__)
#define SNAPKV_VNNI 1
#endif
#if defined(SNAPKV_AVX2) && defined(__AVX512F__)
#define SNAPKV_AVX512F 1
#endif

#define SNAPKV_INLINE inline __attribute__((always_inline))

namespace snapkv::quant {

/// Short name of the compiled kernel level ("avx512-vnni", "avx2", "scalar").
inline const char* isa_name() {
#if defined(SNAPKV_VNNI)
  return "avx512-vnni";
#elif defined(SNAPKV_AVX2)
  return "avx2";
#else
  return "scalar";
#endif
}

#if defined(SNAPKV_AVX2)

/// acc + sum over groups of 4 of u[i]*s[i] (u unsigned bytes, s signed bytes). Without VNNI
/// the pairwise step saturates at int16, so callers keep u <= 128 there.
SNAPKV_INLINE __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s) {
#if defined(SNAPKV_VNNI)
  return _mm256_dpbusd_epi32(acc, u, s);
#else
  const __m256i p = _mm256_maddubs_epi16(u, s);
  return _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
#endif
}

/// acc + pairwise sums of a[i]*b[i] over int16 lanes.
SNAPKV_INLINE __m256i madd_i16(__m256i acc, __m256i a, __m256i b) {
#if defined(SNAPKV_VNNI)
  return _mm256_dpwssd_epi32(acc, a, b);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
#endif
}

/// Sum of the 8 floats, in a fixed order (lanes i and i+4, then pairs, then the last two).
SNAPKV_INLINE float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/// 16 bytes at p expanded to 32 nibbles: bytes 0..15 = low nibbles, 16..31 = high nibbles.
SNAPKV_INLINE __m256i unpack_nibbles16(const uint8_t* p) {
  const __m256i b = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m256i sh = _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4);
  return _mm256_and_si256(_mm256_srlv_epi32(b, sh), _mm256_set1_epi8(0x0F));
}

/// 32 bits -> 32 bytes, byte i = 0x10 if bit i of `bits` is set, else 0.
SNAPKV_INLINE __m256i bits_to_0x10(uint32_t bits) {
#if defined(SNAPKV_VNNI)
  return _mm256_maskz_mov_epi8(static_cast<__mmask32>(bits), _mm256_set1_epi8(0x10));
#else
  const __m256i v = _mm256_set1_epi32(static_cast<int>(bits));
  // byte i takes input byte i/8, then tests bit i%8.
  const __m256i spread = _mm256_shuffle_epi8(v, _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2,
                                                                 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i sel = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
  const __m256i on = _mm256_cmpeq_epi8(_mm256_and_si256(spread, sel), sel);
  return _mm256_and_si256(on, _mm256_set1_epi8(0x10));
#endif
}

#endif  // SNAPKV_AVX2

}  // namespace snapkv::quant
