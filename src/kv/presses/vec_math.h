// snapkv presses: small vectorizable math helpers (exp, f16 -> f32 blocks).
// Plain loops over float/int that GCC/Clang auto-vectorize at -O3 (no -ffast-math needed).
#pragma once

#include <cstdint>
#include <cstring>

#include "core/fp16.h"
#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace snapkv::press_detail {

/// e^x in f32 for x <= 0 (softmax after max subtraction), relative error < 3e-7 for
/// x >= -87; returns exactly 0 for x < -87.3 (where e^x leaves the normal f32 range) and for
/// x = -inf. Cody-Waite range reduction x = n ln2 + r, |r| <= ln2/2, then a degree-7 Taylor
/// polynomial of e^r (truncation error < 5e-9) and 2^n built from the exponent bits.
inline float exp_neg(float x) {
  const float kLog2e = 1.44269504088896341f;
  const float kLn2Hi = 0.693359375f;         // ln 2 split so n * kLn2Hi is exact
  const float kLn2Lo = -2.12194440e-4f;      // ln 2 - kLn2Hi
  const float kRound = 12582912.0f;          // 1.5 * 2^23: adding it rounds to an integer
  const float xc = x < -87.0f ? -87.0f : x;  // keep 2^n normal; masked below
  const float t = xc * kLog2e + kRound;
  const float n = t - kRound;
  const float r = (xc - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return x < -87.3f ? 0.0f : p * scale;
}

/// Converts n IEEE halves to f32 (8 at a time with F16C when available).
inline void f16_to_f32(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
#endif
  for (; i < n; ++i) dst[i] = fp16_to_fp32(src[i]);
}

}  // namespace snapkv::press_detail
