// snapkv: rows of ggml's Q4_0 blocks, the codec of the KV cache's `q4_0` type (see
// snapkv/kv_type.h): per 32 elements one f16 scale d and 32 4-bit q, x ~= d * (q - 8).
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

/// Quantizes x[n] (n a multiple of 32) into n / 32 Q4_0 blocks at dst (18 bytes each), as ggml's
/// quantize_row_q4_0_ref: per block m = the element of largest |x| (its sign kept), d = m / -8,
/// q = min(15, trunc(x * (1 / d) + 8.5)) (all 8, i.e. zeros, for an all-zero block), d stored as
/// f16; byte j of the 16 holds q_j (low nibble) and q_{j+16} (high nibble). A block holding NaN or
/// inf gets a NaN scale (it decodes as NaN, as an F16 cache would keep it); a block whose largest
/// |x| is below ~2.4e-7 decodes as zeros (its f16 scale underflows).
void quantize_q4_0_row(const float* x, uint8_t* dst, int n);

/// Dequantizes n / 32 Q4_0 blocks at src into y[n] (n a multiple of 32): y = f16(d) * (q - 8),
/// exact in f32 (the same bits with and without SIMD).
inline void dequantize_q4_0_row(const uint8_t* src, float* y, int n) {
  for (int b = 0; b < n / kKVQ4Block; ++b, src += kKVQ4BlockBytes, y += kKVQ4Block) {
    uint16_t dh;
    std::memcpy(&dh, src, sizeof(dh));
    const float d = fp16_to_fp32(dh);
    const uint8_t* qs = src + 2;
#if defined(__AVX512F__)
    const __m512 vd = _mm512_set1_ps(d);
    // maskz_ forms: GCC 12 warns (maybe-uninitialized) on the unmasked ones.
    const __m512i b32 = _mm512_maskz_cvtepu8_epi32(0xFFFF, _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
    const __m512i eight = _mm512_set1_epi32(8);
    const __m512i lo = _mm512_sub_epi32(_mm512_and_si512(b32, _mm512_set1_epi32(0xF)), eight);
    const __m512i hi = _mm512_sub_epi32(_mm512_maskz_srli_epi32(0xFFFF, b32, 4), eight);
    _mm512_storeu_ps(y, _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, lo), vd));
    _mm512_storeu_ps(y + 16, _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, hi), vd));
#else
    for (int j = 0; j < kKVQ4Block / 2; ++j) {
      y[j] = static_cast<float>((qs[j] & 0xF) - 8) * d;
      y[j + kKVQ4Block / 2] = static_cast<float>((qs[j] >> 4) - 8) * d;
    }
#endif
  }
}

}  // namespace snapkv
