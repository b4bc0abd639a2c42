// snapkv: f32 <-> f16 row conversions (F16C / AVX-512 where compiled in, scalar otherwise).
// Rounding: round-to-nearest-even, identical to the scalar snapkv::fp32_to_fp16.
#include <cstdint>

#include "core/fp16.h"
#include "quant/quant.h"
#include "quant/simd.h"
#if defined(__F16C__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace snapkv {

void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), h);
  }
#endif
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
#endif
  for (; i < n; ++i) dst[i] = fp32_to_fp16(src[i]);
}

void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
  }
#endif
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  }
#endif
  for (; i < n; ++i) dst[i] = fp16_to_fp32(src[i]);
}

}  // namespace snapkv
