// snapkv: rows of ggml's Q8_0 blocks, the codec of the KV cache's `q8_0` type (see
// snapkv/kv_type.h): per 32 elements one f16 scale d and 32 int8 q, x ~= d * q.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/fp16.h"
#include "snapkv/kv_type.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace snapkv {

/// Quantizes x[n] (n a multiple of 32) into n / 32 Q8_0 blocks at dst (34 bytes each), as ggml's
/// quantize_row_q8_0_ref: per block d = max|x| / 127, q = roundf(x * (1 / d)) (ties away from
/// zero; all zeros for an all-zero block), d stored as f16 (ggml's AVX2 quantizer rounds ties to
/// even instead: rare last-step differences). A block holding NaN or inf gets a NaN scale (it
/// decodes as NaN, as an F16 cache would keep it); a block below ~4e-37 decodes as zeros.
void quantize_q8_0_row(const float* x, uint8_t* dst, int n);

/// Dequantizes n / 32 Q8_0 blocks at src into y[n] (n a multiple of 32): y = f16(d) * q, exact
/// in f32 (the same bits with and without SIMD). Inline: the attention kernels call it per block.
inline void dequantize_q8_0_row(const uint8_t* src, float* y, int n) {
  for (int b = 0; b < n / kKVQ8Block; ++b, src += kKVQ8BlockBytes, y += kKVQ8Block) {
    uint16_t dh;
    std::memcpy(&dh, src, sizeof(dh));
    const float d = fp16_to_fp32(dh);
    const auto* q = reinterpret_cast<const int8_t*>(src + 2);
#if defined(__AVX512F__)
    const __m512 vd = _mm512_set1_ps(d);
    for (int j = 0; j < kKVQ8Block; j += 16) {
      // maskz_ forms: GCC 12 warns (maybe-uninitialized) on the unmasked ones.
      const __m512i qi = _mm512_maskz_cvtepi8_epi32(0xFFFF, _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + j)));
      _mm512_storeu_ps(y + j, _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, qi), vd));
    }
#elif defined(__AVX2__)
    const __m256 vd = _mm256_set1_ps(d);
    for (int j = 0; j < kKVQ8Block; j += 8) {
      const __m256i qi = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + j)));
      _mm256_storeu_ps(y + j, _mm256_mul_ps(_mm256_cvtepi32_ps(qi), vd));
    }
#else
    for (int j = 0; j < kKVQ8Block; ++j) y[j] = static_cast<float>(q[j]) * d;
#endif
  }
}

}  // namespace snapkv
