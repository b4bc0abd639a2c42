// snapkv: the f16 -> f32 lookup table of the decode kernels' block scales (blocks.h).
#include <array>
#include <cstdint>

#include "quant/blocks.h"

namespace snapkv::quant {

const float* f16_f32_table() {
  // Built on first use (thread-safe static initialisation); trivially destructible.
  static const std::array<float, 65536> table = [] {
    std::array<float, 65536> t{};
    for (uint32_t h = 0; h < 65536; ++h) t[h] = fp16_to_fp32(static_cast<uint16_t>(h));
    return t;
  }();
  return table.data();
}

}  // namespace snapkv::quant
