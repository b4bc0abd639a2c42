// FFN activations (see model/activation.h).
#include "model/activation.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "attention/softmax_simd.h"
#include "core/fp16.h"
#if defined(__AVX2__) && defined(__F16C__)
#include <immintrin.h>
#endif

namespace snapkv {

namespace {

/// a[i] = silu(a[i]) * b[i] for i in [begin, end), exp by the prefill softmax's vector exp
/// (attn::exp16 / exp8, the same bits: ~2 ulp; 0 below -87.3, FLT_MAX above 88.7; scalar builds
/// std::exp). Every element gets the same arithmetic (the tail through masked lanes), so a value
/// does not depend on its index or n.
void swiglu_range(float* a, const float* b, int64_t begin, int64_t end) {
#if SNAPKV_ATTN_AVX512
  for (int64_t i = begin; i < end; i += 16) {
    const __mmask16 m = end - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (end - i)) - 1);
    const __m512 x = _mm512_maskz_loadu_ps(m, a + i);
    const __m512 e = attn::exp16(_mm512_sub_ps(_mm512_setzero_ps(), x));
    const __m512 silu = _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    _mm512_mask_storeu_ps(a + i, m, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(m, b + i)));
  }
#elif SNAPKV_ATTN_AVX2
  // exp8 is exp16 lane for lane, so these are the AVX-512 path's bits (the tail through masked
  // loads and stores: zero lanes in, nothing written out).
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t i = begin; i < end; i += 8) {
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::min<int64_t>(8, end - i))), lane);
    const __m256 x = _mm256_maskload_ps(a + i, m);
    const __m256 e = attn::exp8(_mm256_sub_ps(_mm256_setzero_ps(), x));
    const __m256 silu = _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
    _mm256_maskstore_ps(a + i, m, _mm256_mul_ps(silu, _mm256_maskload_ps(b + i, m)));
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
