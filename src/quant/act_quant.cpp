// snapkv: activation quantization for the matmul kernels (layouts in act_quant.h).
#include "quant/act_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "quant/simd.h"

namespace snapkv::quant {
namespace {

inline float round_f16(float v) { return fp16_to_fp32(fp32_to_fp16(v)); }

[[maybe_unused]] inline int8_t to_q8(float v) {
  const long r = std::lrintf(v);  // current rounding mode: nearest, ties to even
  return static_cast<int8_t>(std::clamp(r, -127L, 127L));
}

#if defined(SNAPKV_AVX2)
/// Rounds 32 floats (already scaled) to int8 in order, stores them, returns them.
SNAPKV_INLINE __m256i pack32(const float* x, float id, int8_t* out) {
  const __m256 m = _mm256_set1_ps(id);
  const __m256i q0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), m));
  const __m256i q1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8), m));
  const __m256i q2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16), m));
  const __m256i q3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 24), m));
  // packs interleave the 128-bit lanes; a dword permute restores element order.
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q0, q1), _mm256_packs_epi32(q2, q3));
  __m256i b = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  b = _mm256_max_epi8(b, _mm256_set1_epi8(-127));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), b);
  return b;
}

/// Sums of groups of 4 bytes (signed) -> 8 int32.
SNAPKV_INLINE __m256i group4_sums(__m256i b) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), b), _mm256_set1_epi16(1));
}

SNAPKV_INLINE float abs_max(const float* x, int n) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_setzero_ps();
  for (int i = 0; i < n; i += 8) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)));
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
#else
inline float abs_max(const float* x, int n) {
  float m = 0.0f;
  for (int i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}
#endif

}  // namespace

void quantize_q8_row(const float* x, int64_t cols, int offset, bool with_sum, uint8_t* out) {
  const int64_t nb = cols / 32;
  auto* sv = reinterpret_cast<float*>(out + q8_s_offset(cols));
  if (nb % 2 != 0) std::memset(out + q8_block_offset(nb - 1), 0, kQ8Pair);  // the missing block nb reads as 0
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * 32;
    uint8_t* blk = out + q8_block_offset(b);
    auto* qs = reinterpret_cast<int8_t*>(blk);
    const float amax = abs_max(xb, 32);
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int32_t corr[8];
    int32_t sum = 0;
#if defined(SNAPKV_AVX2)
    const __m256i g = group4_sums(pack32(xb, id, qs));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(corr), _mm256_mullo_epi32(g, _mm256_set1_epi32(-offset)));
    if (with_sum) {
      __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(g), _mm256_extracti128_si256(g, 1));
      s4 = _mm_hadd_epi32(s4, s4);
      s4 = _mm_hadd_epi32(s4, s4);
      sum = _mm_cvtsi128_si32(s4);
    }
#else
    for (int j = 0; j < 32; ++j) qs[j] = to_q8(xb[j] * id);
    for (int i = 0; i < 8; ++i) {
      const int32_t g = qs[4 * i] + qs[4 * i + 1] + qs[4 * i + 2] + qs[4 * i + 3];
      corr[i] = -offset * g;
      sum += g;
    }
#endif
    std::memcpy(blk + kQ8Corr, corr, sizeof(corr));
    const float dr = round_f16(d);
    for (int i = 0; i < 8; ++i) std::memcpy(blk + kQ8Dv + 4 * i, &dr, 4);
    sv[b] = with_sum ? round_f16(d * static_cast<float>(sum)) : 0.0f;
  }
}

void quantize_q8k_row(const float* x, int64_t cols, uint8_t* out) {
  const int64_t nb = cols / 256;
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * 256;
    uint8_t* blk = out + b * kQ8KBlock;
    auto* qs = reinterpret_cast<int8_t*>(blk);
    int16_t bs16[16], bs32[8];
    float d = 0.0f;
    const float amax = abs_max(xb, 256);
    if (!(amax > 0.0f)) {
      std::memset(qs, 0, 256);
      std::memset(bs16, 0, sizeof(bs16));
    } else {
      // The first element of largest magnitude, with its sign (ggml keeps the first).
      float mx = 0.0f;
      for (int j = 0; j < 256; ++j) {
        if (std::fabs(xb[j]) == amax) {
          mx = xb[j];
          break;
        }
      }
      const float iscale = -127.0f / mx;
      d = 1.0f / iscale;
#if defined(SNAPKV_AVX2)
      for (int c = 0; c < 8; ++c) {
        const __m256i g = group4_sums(pack32(xb + 32 * c, iscale, qs + 32 * c));
        alignas(32) int32_t gs[8];
        _mm256_store_si256(reinterpret_cast<__m256i*>(gs), g);
        bs16[2 * c] = static_cast<int16_t>(gs[0] + gs[1] + gs[2] + gs[3]);
        bs16[2 * c + 1] = static_cast<int16_t>(gs[4] + gs[5] + gs[6] + gs[7]);
      }
#else
      for (int j = 0; j < 256; ++j) qs[j] = to_q8(iscale * xb[j]);
      for (int g = 0; g < 16; ++g) {
        int s = 0;
        for (int j = 0; j < 16; ++j) s += qs[16 * g + j];
        bs16[g] = static_cast<int16_t>(s);
      }
#endif
    }
    for (int g = 0; g < 8; ++g) bs32[g] = static_cast<int16_t>(bs16[2 * g] + bs16[2 * g + 1]);
    std::memcpy(blk + kQ8KBsum16, bs16, sizeof(bs16));
    std::memcpy(blk + kQ8KBsum32, bs32, sizeof(bs32));
    std::memcpy(blk + kQ8KD, &d, sizeof(d));
    std::memset(blk + kQ8KD + 4, 0, kQ8KBlock - kQ8KD - 4);
  }
}

void round_row_f16(const float* x, int64_t cols, float* out) {
  int64_t i = 0;
#if defined(SNAPKV_AVX2)
  for (; i + 8 <= cols; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
#endif
  for (; i < cols; ++i) out[i] = round_f16(x[i]);
}

void round_row_bf16(const float* x, int64_t cols, float* out) {
  for (int64_t i = 0; i < cols; ++i) out[i] = bf16_to_fp32(fp32_to_bf16(x[i]));
}

}  // namespace snapkv::quant
