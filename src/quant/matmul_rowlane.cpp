// snapkv: the row-lane Q8_0 matmul of 1-7 tokens (quant/kern_rowlane.h).
#include <fmt/format.h>
#include <omp.h>

#include "quant/act_quant.h"
#include "quant/kern_rowlane.h"
#include "quant/matmul_impl.h"
#include "snapkv/error.h"

namespace snapkv::quant {

void matmul_rowlane_q8_0(const uint8_t* packed, int64_t rows, int64_t cols, const float* X, int64_t n, float* Y,
                         ThreadContext& tc) {
  if (n < 1 || n > kRowLaneMaxTokens || cols % 32 != 0 || rows < 1)
    throw Error(
        fmt::format("matmul_rowlane_q8_0: {} tokens of {} columns ({} rows): needs 1-{} tokens and columns "
                    "a multiple of 32",
                    n, cols, rows, kRowLaneMaxTokens));
#if defined(SNAPKV_VNNI)
  // Each token quantized to Q8_0 (offset 128, as the token-lane kernels do), then the groups of 16
  // rows split evenly over the threads.
  const size_t q8 = q8_row_stride(cols), ab = rowlane_act_bytes(cols);
  uint8_t* act = tc.scratch(kSlotAct, 0, static_cast<size_t>(n) * q8);
  uint8_t* abuf = tc.scratch(kSlotLanes, 0, static_cast<size_t>(n) * ab);
  RowLaneAct x[kRowLaneMaxTokens];
  for (int64_t t = 0; t < n; ++t) {
    quantize_q8_row(X + t * cols, cols, 128, false, act + static_cast<size_t>(t) * q8);
    x[t] = build_rowlane_act(act + static_cast<size_t>(t) * q8, cols, abuf + static_cast<size_t>(t) * ab);
  }
  const int64_t ng = (rows + kRowLaneRows - 1) / kRowLaneRows;
#pragma omp parallel num_threads(tc.n_threads())
  {
    const int64_t me = omp_get_thread_num(), team = omp_get_num_threads();
    rowlane_q8_0(packed, rows, cols, x, static_cast<int>(n), Y, static_cast<size_t>(rows), ng * me / team,
                 ng * (me + 1) / team);
  }
#else
  (void)packed, (void)X, (void)Y, (void)tc;
  throw Error("matmul_rowlane_q8_0: this build has no AVX-512 VNNI (kRowLaneSupported is false)");
#endif
}

}  // namespace snapkv::quant
