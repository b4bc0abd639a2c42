// snapkv: matmul entry point: argument checks, then the per-type kernel.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "quant/act_quant.h"
#include "quant/matmul_impl.h"
#include "quant/quant.h"
#include "snapkv/error.h"

namespace snapkv {

namespace quant {

bool token_lanes_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("SNAPKV_TOKEN_LANES");
    return v == nullptr || std::string_view(v) != "0";
  }();
  return on;
}

}  // namespace quant

void matmul(const WeightView& W, const float* X, int64_t n_tokens, float* Y, ThreadContext& tc) {
  const auto id = static_cast<uint32_t>(W.type);
  if (!ggml_type_known(id) || !ggml_type_supported(W.type)) {
    throw Error(fmt::format("matmul: weight type {} has no snapkv kernels", ggml_type_name(id)));
  }
  const int64_t bs = ggml_type_traits(id).block_size;
  if (W.cols < 0 || W.cols % bs != 0) {
    throw Error(
        fmt::format("matmul: {} columns is not a multiple of the {} block size {}", W.cols, ggml_type_name(id), bs));
  }
  if (W.rows < 0) throw Error(fmt::format("matmul: negative row count {}", W.rows));
  if (n_tokens < 0) throw Error(fmt::format("matmul: negative token count {}", n_tokens));
  if (n_tokens == 0 || W.rows == 0) return;
  if (Y == nullptr || (W.cols > 0 && (X == nullptr || W.data == nullptr))) {
    throw Error("matmul: null weight, input or output pointer");
  }
  if (W.cols == 0) {
    std::fill(Y, Y + n_tokens * W.rows, 0.0f);
    return;
  }
  switch (W.type) {
    case GGMLType::Q4_0:
      return quant::matmul_q4_0(W, X, n_tokens, Y, tc);
    case GGMLType::Q4_1:
      return quant::matmul_q4_1(W, X, n_tokens, Y, tc);
    case GGMLType::Q5_0:
      return quant::matmul_q5_0(W, X, n_tokens, Y, tc);
    case GGMLType::Q5_1:
      return quant::matmul_q5_1(W, X, n_tokens, Y, tc);
    case GGMLType::Q8_0:
      return quant::matmul_q8_0(W, X, n_tokens, Y, tc);
    case GGMLType::Q4_K:
      return quant::matmul_q4_k(W, X, n_tokens, Y, tc);
    case GGMLType::Q5_K:
      return quant::matmul_q5_k(W, X, n_tokens, Y, tc);
    case GGMLType::Q6_K:
      return quant::matmul_q6_k(W, X, n_tokens, Y, tc);
    case GGMLType::F32:
      return quant::matmul_f32(W, X, n_tokens, Y, tc);
    case GGMLType::F16:
      return quant::matmul_f16(W, X, n_tokens, Y, tc);
    case GGMLType::BF16:
      return quant::matmul_bf16(W, X, n_tokens, Y, tc);
    default:
      throw Error(fmt::format("matmul: weight type {} has no snapkv kernels", ggml_type_name(id)));
  }
}

}  // namespace snapkv
