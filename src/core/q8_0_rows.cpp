// Q8_0 rows (see core/q8_0_rows.h).
#include "core/q8_0_rows.h"

#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "snapkv/kv_type.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace snapkv {

void quantize_q8_0_row(const float* x, uint8_t* dst, int n) {
  for (int b = 0; b < n / kKVQ8Block; ++b, x += kKVQ8Block, dst += kKVQ8BlockBytes) {
    float amax = 0.0f;
    for (int j = 0; j < kKVQ8Block; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t dh = fp32_to_fp16(d);
    std::memcpy(dst, &dh, sizeof(dh));
    auto* q = reinterpret_cast<int8_t*>(dst + 2);
    for (int j = 0; j < kKVQ8Block; ++j) q[j] = static_cast<int8_t>(std::roundf(x[j] * id));
  }
}

void dequantize_q8_0_row(const uint8_t* src, float* y, int n) {
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

void dequantize_q8_0_rows(const uint8_t* src, float* y, int64_t rows, int n) {
  const size_t rb = kv_row_bytes(KVType::Q8_0, n);
  for (int64_t r = 0; r < rows; ++r) dequantize_q8_0_row(src + static_cast<size_t>(r) * rb, y + r * n, n);
}

}  // namespace snapkv
