// Q8_0 rows (see core/q8_0_rows.h).
#include "core/q8_0_rows.h"

#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "snapkv/kv_type.h"

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

}  // namespace snapkv
