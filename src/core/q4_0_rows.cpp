// Q4_0 rows (see core/q4_0_rows.h).
#include "core/q4_0_rows.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "snapkv/kv_type.h"

namespace snapkv {

void quantize_q4_0_row(const float* x, uint8_t* dst, int n) {
  constexpr int kHalf = kKVQ4Block / 2;
  for (int b = 0; b < n / kKVQ4Block; ++b, x += kKVQ4Block, dst += kKVQ4BlockBytes) {
    float amax = 0.0f;
    float m = 0.0f;  // the element of largest magnitude, sign kept (the first one on ties)
    bool finite = true;
    for (int j = 0; j < kKVQ4Block; ++j) {
      finite = finite && std::isfinite(x[j]);
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        m = x[j];
      }
    }
    uint8_t* qs = dst + 2;
    if (!finite) {  // NaN / inf stay visible: a NaN scale makes the whole block decode as NaN
      const uint16_t nan = 0x7E00;
      std::memcpy(dst, &nan, sizeof(nan));
      std::memset(qs, 0x88, kHalf);
      continue;
    }
    const float d = m / -8.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    if (!std::isfinite(id)) id = 0.0f;  // |m| below ~3e-38: 1 / d overflows; the block is zero in f16 anyway
    const uint16_t dh = fp32_to_fp16(d);
    std::memcpy(dst, &dh, sizeof(dh));
    auto code = [&](float v) {
      // v * id lies in [-8, 8] (up to rounding), so v * id + 8.5 is in [0.5, 16.5]: trunc, then cap.
      const float t = std::max(0.0f, v * id + 8.5f);
      return static_cast<uint8_t>(std::min(15, static_cast<int>(t)));
    };
    for (int j = 0; j < kHalf; ++j) qs[j] = static_cast<uint8_t>(code(x[j]) | (code(x[j + kHalf]) << 4));
  }
}

}  // namespace snapkv
