// snapkv: RowsView::row (declared in core/rows_view.h).
#include "core/rows_view.h"

#include <fmt/format.h>

#include <cstring>

#include "core/fp16.h"
#include "snapkv/error.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace snapkv {

void RowsView::row(int64_t i, float* out) const {
  if (i < 0 || i >= n) throw Error(fmt::format("RowsView::row: row {} out of range [0, {})", i, n));
  const size_t off = static_cast<size_t>(i) * static_cast<size_t>(head_dim);
  if (type == KVType::F32) {
    std::memcpy(out, static_cast<const float*>(data) + off, sizeof(float) * static_cast<size_t>(head_dim));
    return;
  }
  const uint16_t* src = static_cast<const uint16_t*>(data) + off;
  int64_t d = 0;
#if defined(__F16C__)
  for (; d + 8 <= head_dim; d += 8)
    _mm256_storeu_ps(out + d, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + d))));
#endif
  for (; d < head_dim; ++d) out[d] = fp16_to_fp32(src[d]);
}

}  // namespace snapkv
