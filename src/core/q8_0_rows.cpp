// Q8_0 rows (see core/q8_0_rows.h).
#include "core/q8_0_rows.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "snapkv/kv_type.h"

namespace snapkv {

void quantize_q8_0_row(const float* x, uint8_t* dst, int n) {
  for (int b = 0; b < n / kKVQ8Block; ++b, x += kKVQ8Block, dst += kKVQ8BlockBytes) {
    float amax = 0.0f;
    bool finite = true;
    for (int j = 0; j < kKVQ8Block; ++j) {
      finite = finite && std::isfinite(x[j]);
      amax = std::fmax(amax, std::fabs(x[j]));
    }
    auto* q = reinterpret_cast<int8_t*>(dst + 2);
    if (!finite) {  // NaN / inf stay visible: a NaN scale makes the whole block decode as NaN
      const uint16_t nan = 0x7E00;
      std::memcpy(dst, &nan, sizeof(nan));
      std::memset(q, 0, kKVQ8Block);
      continue;
    }
    const float d = amax / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    if (!std::isfinite(id)) id = 0.0f;  // amax below ~4e-37: 1 / d overflows; the block is zero in f16 anyway
    const uint16_t dh = fp32_to_fp16(d);
    std::memcpy(dst, &dh, sizeof(dh));
    for (int j = 0; j < kKVQ8Block; ++j)
      q[j] = static_cast<int8_t>(std::clamp(std::roundf(x[j] * id), -127.0f, 127.0f));
  }
}

}  // namespace snapkv
