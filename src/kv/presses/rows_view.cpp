// snapkv: RowsView::row (declared in snapkv/press.h).
#include <fmt/format.h>

#include <cstring>

#include "kv/presses/vec_math.h"
#include "snapkv/error.h"
#include "snapkv/press.h"

namespace snapkv {

void RowsView::row(int64_t i, float* out) const {
  if (i < 0 || i >= n) throw Error(fmt::format("RowsView::row: row {} out of range [0, {})", i, n));
  const size_t off = static_cast<size_t>(i) * static_cast<size_t>(head_dim);
  if (type == KVType::F32) {
    std::memcpy(out, static_cast<const float*>(data) + off, sizeof(float) * static_cast<size_t>(head_dim));
  } else {
    press_detail::f16_to_f32(static_cast<const uint16_t*>(data) + off, out, head_dim);
  }
}

}  // namespace snapkv
