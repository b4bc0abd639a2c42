// snapkv: blocking / threading of the token-lane prefill kernels (AVX-512 VNNI, AVX2).
//
// The 16 lanes of a register (two 8-lane registers with AVX2) are 16 tokens: the activations
// are transposed once per call into 16-token tiles, and a micro-kernel computes kLaneRows
// weight rows x 16 tokens with one f32 accumulator per (row, token), updated once per block
// in block order. Weight rows are unpacked kLaneRows at a time into a per-thread buffer
// (unsigned quants + scales) and reused for every token tile of a chunk (chunks keep the
// transposed activations in L2).
// The (chunk, row tile) items are shared out with a WorkSplit (core/work_split.h: each thread
// walks its contiguous range, then takes items from the back of a slower thread's; OpenMP's
// static schedule with SNAPKV_MATMUL_STEAL=0); a value never depends on the thread count, the
// token's lane or tile, only on (row, token) and the data.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "core/work_split.h"
#include "quant/matmul_impl.h"
#include "quant/quant.h"
#include "quant/tiling.h"

namespace snapkv::quant {

inline constexpr int kLanes = 16;                      ///< tokens per tile (register lanes)
inline constexpr int kLaneRows = 8;                    ///< weight rows per micro-tile
inline constexpr size_t kLaneChunkBytes = 256 * 1024;  ///< transposed activation bytes per chunk

/// P (the weight family) provides:
///   kTileBlockBytes  bytes of one token tile for one weight block (lane layout)
///   kEntryBytes      bytes of one unpacked (row, block) entry (multiple of 64)
///   kBlock           elements per weight block
///   build_tile(act, a_stride, n_tokens, cols, tile, out)   transpose one token tile
///   unpack(const uint8_t* block, uint8_t* entry) / zero(uint8_t* entry)
///   tile(const uint8_t* entries, const uint8_t* xt, int64_t nb, float (&out)[kLaneRows][kLanes])
///     with entries laid out [block][row].
template <class P>
void run_lanes(const WeightView& W, const uint8_t* act, size_t a_stride, int64_t n_tokens, float* Y,
               ThreadContext& tc) {
  const int64_t nb = W.cols / P::kBlock;
  const int64_t rows = W.rows;
  const size_t w_stride = W.row_bytes();
  const size_t blk_bytes = w_stride / static_cast<size_t>(nb);
  const int64_t n_tiles = (n_tokens + kLanes - 1) / kLanes;
  const size_t tile_bytes = static_cast<size_t>(nb) * P::kTileBlockBytes;
  uint8_t* lanes = tc.scratch(kSlotLanes, 0, static_cast<size_t>(n_tiles) * tile_bytes);
#pragma omp parallel for schedule(static) num_threads(tc.n_threads()) if (n_tiles > 1)
  for (int64_t tile = 0; tile < n_tiles; ++tile) {
    P::build_tile(act, a_stride, n_tokens, W.cols, tile, lanes + static_cast<size_t>(tile) * tile_bytes);
  }
  const int64_t tiles_per_chunk = std::max<int64_t>(1, static_cast<int64_t>(kLaneChunkBytes / tile_bytes));
  const int64_t n_chunks = (n_tiles + tiles_per_chunk - 1) / tiles_per_chunk;
  const int64_t n_rt = (rows + kLaneRows - 1) / kLaneRows;
  // Row tile rt of token chunk c, with `entries` the thread's unpacked-rows buffer.
  auto item = [&](int64_t c, int64_t rt, uint8_t* entries) {
    const int64_t c0 = c * tiles_per_chunk, c1 = std::min(n_tiles, c0 + tiles_per_chunk);
    const int64_t r0 = rt * kLaneRows;
    const int nr = static_cast<int>(std::min<int64_t>(kLaneRows, rows - r0));
    for (int r = 0; r < kLaneRows; ++r) {
      const uint8_t* row = W.data + static_cast<size_t>(r0 + r) * w_stride;
      for (int64_t b = 0; b < nb; ++b) {
        uint8_t* e = entries + (static_cast<size_t>(b) * kLaneRows + r) * P::kEntryBytes;
        if (r < nr) {
          P::unpack(row + static_cast<size_t>(b) * blk_bytes, e);
        } else {
          P::zero(e);
        }
      }
    }
    for (int64_t tile = c0; tile < c1; ++tile) {
      float out[kLaneRows][kLanes];
      P::tile(entries, lanes + static_cast<size_t>(tile) * tile_bytes, nb, out);
      const int nl = static_cast<int>(std::min<int64_t>(kLanes, n_tokens - tile * kLanes));
      for (int l = 0; l < nl; ++l) {
        float* y = Y + (tile * kLanes + l) * rows + r0;
        for (int r = 0; r < nr; ++r) y[r] = out[r][l];
      }
    }
  };
  // Items in chunk-major order: a thread's range is mostly consecutive row tiles of one chunk
  // (it may span two, and stolen items come from another range).
  const bool par = n_rt > 1;
  WorkSplit split;
  const bool steal =
      par && WorkSplit::suits(tc.n_threads()) && matmul_steal() && n_chunks * n_rt <= WorkSplit::kMaxItems;
  if (steal) split.reset(n_chunks * n_rt, tc.n_threads());
#pragma omp parallel num_threads(tc.n_threads()) if (par)
  {
    uint8_t* entries =
        tc.scratch(kSlotEntries, omp_get_thread_num(), static_cast<size_t>(nb) * kLaneRows * P::kEntryBytes);
    if (steal) {
      int64_t it = 0;
      while (split.next(omp_get_thread_num(), it)) item(it / n_rt, it % n_rt, entries);
    } else {
      for (int64_t c = 0; c < n_chunks; ++c) {
#pragma omp for schedule(static) nowait
        for (int64_t rt = 0; rt < n_rt; ++rt) item(c, rt, entries);
      }
    }
  }
}

}  // namespace snapkv::quant
