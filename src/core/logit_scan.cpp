#include "core/logit_scan.h"

#include <cmath>
#include <limits>

#if defined(__AVX2__)
#include <immintrin.h>
#endif
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
// GCC 12's false positive inside its own AVX-512 reduction intrinsics (GCC bug 105593; as in
// quant/simd.h).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace snapkv {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

/// The sequential scan from `best` (whose value is not NaN) over x[from..n).
int64_t continue_argmax(const float* x, int64_t from, int64_t n, int64_t best) {
  for (int64_t i = from; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return best;
}

}  // namespace

// Vector form: lane l keeps the first maximum of the elements i == l (mod lanes) that beat -inf
// (strict >, so NaN and -inf never enter and each lane keeps its first occurrence); the answer is
// the lowest index among the lanes holding the largest value, i.e. the first occurrence of the
// row's maximum: what the sequential scan returns when x[0] is not NaN. No lane updated means
// every element seen is -inf or NaN, where the scan keeps index 0.
int64_t first_max_index(const float* x, int64_t n) {
  if (n <= 1 || std::isnan(x[0])) return 0;
  int64_t i = 0;
  int64_t best = 0;
  if (n > INT32_MAX) return continue_argmax(x, 1, n, 0);  // the lanes count indices in 32 bits
#if defined(__AVX512F__)
  if (n >= 16) {
    __m512 vmax = _mm512_set1_ps(-kInf);
    __m512i vidx = _mm512_set1_epi32(-1);
    __m512i cur = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i step = _mm512_set1_epi32(16);
    for (; i + 16 <= n; i += 16) {
      const __m512 v = _mm512_loadu_ps(x + i);
      const __mmask16 gt = _mm512_cmp_ps_mask(v, vmax, _CMP_GT_OQ);
      vmax = _mm512_mask_mov_ps(vmax, gt, v);
      vidx = _mm512_mask_mov_epi32(vidx, gt, cur);
      cur = _mm512_add_epi32(cur, step);
    }
    const float m = _mm512_reduce_max_ps(vmax);
    if (m > -kInf) {
      const __mmask16 at = _mm512_cmp_ps_mask(vmax, _mm512_set1_ps(m), _CMP_EQ_OQ);
      best = _mm512_mask_reduce_min_epi32(at, vidx);
    }
  }
#elif defined(__AVX2__)
  if (n >= 8) {
    __m256 vmax = _mm256_set1_ps(-kInf);
    __m256i vidx = _mm256_set1_epi32(-1);
    __m256i cur = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i step = _mm256_set1_epi32(8);
    for (; i + 8 <= n; i += 8) {
      const __m256 v = _mm256_loadu_ps(x + i);
      const __m256 gt = _mm256_cmp_ps(v, vmax, _CMP_GT_OQ);
      vmax = _mm256_blendv_ps(vmax, v, gt);
      vidx = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(vidx), _mm256_castsi256_ps(cur), gt));
      cur = _mm256_add_epi32(cur, step);
    }
    alignas(32) float lm[8];
    alignas(32) int32_t li[8];
    _mm256_store_ps(lm, vmax);
    _mm256_store_si256(reinterpret_cast<__m256i*>(li), vidx);
    float m = -kInf;
    for (int l = 0; l < 8; ++l) m = lm[l] > m ? lm[l] : m;
    if (m > -kInf) {
      int64_t b = n;
      for (int l = 0; l < 8; ++l)
        if (lm[l] == m && li[l] >= 0 && li[l] < b) b = li[l];
      best = b;
    }
  }
#endif
  return continue_argmax(x, i, n, best);
}

int64_t first_nan_or_pos_inf(const float* x, int64_t n, bool* any_finite) {
  bool finite = false;
  int64_t i = 0;
#if defined(__AVX512F__)
  const __m512 inf = _mm512_set1_ps(kInf);
  __mmask16 fin = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    const __mmask16 bad = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(v, inf, _CMP_EQ_OQ);
    if (bad != 0) return i + __builtin_ctz(bad);
    fin |= _mm512_cmp_ps_mask(v, _mm512_set1_ps(-kInf), _CMP_NEQ_OQ);
  }
  finite = fin != 0;
#elif defined(__AVX2__)
  const __m256 inf = _mm256_set1_ps(kInf);
  __m256 fin = _mm256_setzero_ps();
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const int bad =
        _mm256_movemask_ps(_mm256_or_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q), _mm256_cmp_ps(v, inf, _CMP_EQ_OQ)));
    if (bad != 0) return i + __builtin_ctz(static_cast<unsigned>(bad));
    fin = _mm256_or_ps(fin, _mm256_cmp_ps(v, _mm256_set1_ps(-kInf), _CMP_NEQ_OQ));
  }
  finite = _mm256_movemask_ps(fin) != 0;
#endif
  for (; i < n; ++i) {
    const float v = x[i];
    if (std::isnan(v) || v == kInf) return i;
    finite = finite || v != -kInf;
  }
  *any_finite = finite;
  return -1;
}

}  // namespace snapkv
