// FFN activations (see model/activation.h).
#include "model/activation.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/fp16.h"
#if defined(__AVX2__) && defined(__F16C__)
#include <immintrin.h>
#endif
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
// GCC 12's false positive inside its own AVX-512 intrinsics (GCC bug 105593; as in quant/simd.h).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace snapkv {

namespace {

#if defined(__AVX512F__)
/// exp(x) on 16 lanes: x = n ln2 + r with |r| <= ln2 / 2 (ln2 split in two for an exact n ln2),
/// e^r by its degree-7 Taylor polynomial (truncation < 1e-8 relative), times 2^n by vscalefps,
/// which also gives inf / 0 beyond the float range. A few ulp of expf (the test bounds SwiGLU
/// at 4e-7 relative); NaN stays NaN.
inline __m512 exp16(__m512 x) {
  // vmaxps / vminps return their second operand when one is NaN: x second keeps a NaN.
  x = _mm512_min_ps(_mm512_set1_ps(100.0f), _mm512_max_ps(_mm512_set1_ps(-110.0f), x));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);  // ln2's high part: n * it is exact
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);      // ln2 - 0.693359375
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}
#endif

/// a[i] = silu(a[i]) * b[i] for i in [begin, end). Every element gets the same arithmetic
/// (AVX-512: the tail through masked lanes), so a value does not depend on its index or on n.
void swiglu_range(float* a, const float* b, int64_t begin, int64_t end) {
#if defined(__AVX512F__)
  for (int64_t i = begin; i < end; i += 16) {
    const __mmask16 m = end - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (end - i)) - 1);
    const __m512 x = _mm512_maskz_loadu_ps(m, a + i);
    const __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), x));
    const __m512 silu = _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    _mm512_mask_storeu_ps(a + i, m, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(m, b + i)));
  }
#else
  for (int64_t i = begin; i < end; ++i) {
    const float x = a[i];
    a[i] = (x / (1.0f + std::exp(-x))) * b[i];
  }
#endif
}

}  // namespace

void swiglu_inplace(float* a, const float* b, int64_t n, int n_threads) {
  if (n >= 65536 && n_threads > 1) {
    constexpr int64_t kChunk = 4096;
#pragma omp parallel for schedule(static) num_threads(n_threads)
    for (int64_t c = 0; c < (n + kChunk - 1) / kChunk; ++c)
      swiglu_range(a, b, c * kChunk, std::min(n, (c + 1) * kChunk));
  } else {
    swiglu_range(a, b, 0, n);
  }
}

float gelu_tanh_ref(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  constexpr float kCoefA = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoefA * x * x)));
}

namespace {

// gelu of every F16 value, rounded to F16 (ggml's ggml_table_gelu_f16), stored as f32.
const std::vector<float>& gelu_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t i = 0; i < 65536; ++i) {
      const float x = fp16_to_fp32(static_cast<uint16_t>(i));
      t[i] = fp16_to_fp32(fp32_to_fp16(gelu_tanh_ref(x)));
    }
    return t;
  }();
  return table;
}

}  // namespace

void geglu_inplace(float* a, const float* b, int64_t n, int n_threads) {
  const float* table = gelu_table().data();
  auto scalar = [&](int64_t i) {
    const float x = a[i];
    float g;
    if (x <= -10.0f) {
      g = 0.0f;
    } else if (x >= 10.0f) {
      g = x;
    } else {
      g = table[fp32_to_fp16(x)];
    }
    a[i] = g * b[i];
  };
  // 8 at a time: F16 bits of x index the table (gather); x <= -10 -> 0, x >= 10 -> x.
  auto range = [&](int64_t lo, int64_t hi) {
    int64_t i = lo;
#if defined(__AVX2__) && defined(__F16C__)
    const __m256 lo_lim = _mm256_set1_ps(-10.0f), hi_lim = _mm256_set1_ps(10.0f);
    for (; i + 8 <= hi; i += 8) {
      const __m256 x = _mm256_loadu_ps(a + i);
      const __m256i idx = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
      __m256 g = _mm256_i32gather_ps(table, idx, 4);
      g = _mm256_blendv_ps(g, x, _mm256_cmp_ps(x, hi_lim, _CMP_GE_OQ));
      g = _mm256_blendv_ps(g, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo_lim, _CMP_LE_OQ));
      _mm256_storeu_ps(a + i, _mm256_mul_ps(g, _mm256_loadu_ps(b + i)));
    }
#endif
    for (; i < hi; ++i) scalar(i);
  };
  if (n >= 65536 && n_threads > 1) {
    const int64_t chunk = 4096;
#pragma omp parallel for schedule(static) num_threads(n_threads)
    for (int64_t c = 0; c < (n + chunk - 1) / chunk; ++c) range(c * chunk, std::min(n, (c + 1) * chunk));
  } else {
    range(0, n);
  }
}

}  // namespace snapkv
