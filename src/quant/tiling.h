// snapkv: the blocking / threading skeleton shared by every matmul kernel.
//
// Y[t][r] = dot(W.row(r), X[t]) is computed by micro-kernels K::tile<R, T> that produce an
// R-rows x T-tokens tile of Y, loading each weight block once per tile (register tiling).
// Every (row, token) pair owns one accumulator and goes through exactly the same operations
// in every tile shape, so a value does not depend on R, T, the token chunking or the thread
// that computes it: results are bitwise identical across thread counts, and a decode call
// (n_tokens == 1) gives exactly the row of a batched call served by these kernels (quantized
// prefill of >= 8 tokens (on AVX2 12 for the K-quants, 16 for Q8_0) goes to the token-lane
// kernels instead, lane_driver.h: the 32-element types and the K-quants with AVX2 or AVX-512 VNNI).
//
// Blocking: tokens are processed in chunks whose quantized activations fit in L2; inside a
// chunk, OpenMP threads take contiguous ranges of 32-row blocks and walk their rows R at a time,
// each R-row weight tile (L1) serving all tokens of the chunk. A product of one token chunk (every
// decode call) shares its row blocks out with a WorkSplit (core/work_split.h): each thread starts on
// its own range and, once done, takes blocks from the far end of a slower thread's range; longer
// products use OpenMP's static schedule.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>

#include "core/work_split.h"
#include "quant/blocks.h"
#include "quant/prefetch.h"
#include "quant/quant.h"

namespace snapkv::quant {

/// Everything a micro-kernel needs. Token t's activation row starts at act + t * a_stride
/// (layout per kernel family, act_quant.h); Y[t][r] is y[t * y_stride + r].
struct TileCtx {
  const uint8_t* w = nullptr;  ///< row 0 of the weights
  size_t w_stride = 0;         ///< bytes per weight row
  const uint8_t* act = nullptr;
  size_t a_stride = 0;
  int64_t cols = 0;
  float* y = nullptr;
  int64_t y_stride = 0;
  int n_threads = 1;  ///< OpenMP threads of the parallel region (ThreadContext::n_threads)
  int64_t rows = 0;   ///< rows of W
  /// Decode tiles of several rows (T == 1, R > 1) ask for row r + prefetch_rows before row r
  /// when that row exists (0: no prefetch); tiles_loop_rt sets it.
  int64_t prefetch_rows = 0;
  /// f16_f32_table(), looked up once per TileCtx (about once per product) rather than once per
  /// tile: a call and a guard check per tile were ~0.7 % of a Gemma 3 decode's samples. (So the
  /// first product of any type builds the 256 KiB table.)
  const float* f16_table = f16_f32_table();
  /// Shares the row blocks out among the team (reset for this product's row blocks, shared by the
  /// team), or null: OpenMP's static schedule. Used only when the product is one token chunk.
  WorkSplit* split = nullptr;
};

/// The context of Y = W X for weights W and activation rows act (a_stride bytes apart).
inline TileCtx tile_ctx(const WeightView& W, const uint8_t* act, size_t a_stride, float* Y, int n_threads) {
  TileCtx c;
  c.w = W.data;
  c.w_stride = W.row_bytes();
  c.act = act;
  c.a_stride = a_stride;
  c.cols = W.cols;
  c.y = Y;
  c.y_stride = W.rows;
  c.n_threads = n_threads;
  c.rows = W.rows;
  return c;
}

inline constexpr int64_t kRowBlock = 32;              ///< rows per scheduling unit (multiple of every kR)
inline constexpr size_t kActChunkBytes = 192 * 1024;  ///< activation bytes per token chunk (L2-sized)
inline constexpr double kSerialMacs = 1 << 16;        ///< below this many MACs stay single-threaded

/// K's R x T tile called as a function of its own, never inlined into tiles_loop_rt: the legacy
/// types' AVX-512 VNNI 16-row decode tile (T == 1, R >= 8) goes through it. Inlined into the row
/// loop (GCC 12's choice, which moved with an unrelated edit), the loop's pointers and counters
/// did not fit the registers beside the tile's and lived in vector registers and on the stack:
/// cache-resident, the Q4_1 tile ran 1.9x slower at one thread than as a call, the other legacy
/// types 1.1-1.2x (docs/benchmarks.md, "Decode matmul tiles as calls of their own"). Whether the
/// AVX2 2-row decode tiles are inlined is left to the compiler (not measured this way).
template <class K, int R, int T>
[[gnu::noinline]] void decode_tile(const TileCtx& c, int64_t r, int64_t t) {
  K::template tile<R, T>(c, r, t);
}

/// The rows of Y = W X with K's R x T tiles (R = 1 and T = 1 for the row / token remainders),
/// shared out among the threads of the enclosing OpenMP team, no barrier at the end: through
/// c.split when it is set and the product is one token chunk (no worksharing construct; the
/// caller of the region reset the split for these rows, share_rows), else an orphaned `omp for`.
/// run_tiles wraps it in a parallel region of its own; matmul_group runs several products' loops
/// in one region.
template <class K, int R, int T>
void tiles_loop_rt(const TileCtx& c0, int64_t rows, int64_t n_tokens) {
  TileCtx c = c0;
  c.rows = rows;
  static_assert(kRowBlock % R == 0);
  const int64_t n_items = (rows + kRowBlock - 1) / kRowBlock;
  int64_t tc = static_cast<int64_t>(kActChunkBytes / std::max<size_t>(c.a_stride, 1));
  tc = std::max<int64_t>(T, tc / T * T);

  // Kernels whose rows cost more to compute than to load (K::kPrefetchRows) ask for the rows
  // ~4 KiB ahead of each tile: without it loads and compute hardly overlap (quant/prefetch.h).
  // A decode tile of several rows (T == 1, R > 1) of a kernel that says so
  // (K::kDecodeTilePrefetches) walks them one by one and asks for each row itself
  // (TileCtx::prefetch_rows): one request of R rows at once slowed the stream by ~25 %.
  constexpr bool kTilePrefetch = T == 1 && R > 1 && requires { requires K::kDecodeTilePrefetches; };
  const int64_t ahead =
      K::kPrefetchRows && c.w_stride > 0 && matmul_prefetch()
          ? std::max<int64_t>(kTilePrefetch ? 1 : R,
                              static_cast<int64_t>((kPrefetchAheadBytes + c.w_stride - 1) / c.w_stride))
          : 0;
  c.prefetch_rows = kTilePrefetch ? ahead : 0;
  // Row block `it` for the tokens [t_begin, t_end).
  auto row_block = [&](int64_t it, int64_t t_begin, int64_t t_end) {
    const int64_t r_end = std::min(rows, (it + 1) * kRowBlock);
    int64_t r = it * kRowBlock;
    for (; r + R <= r_end; r += R) {
      if (!kTilePrefetch && ahead > 0 && r + ahead + R <= rows)
        prefetch_l2(c.w + static_cast<size_t>(r + ahead) * c.w_stride, R * c.w_stride);
      int64_t t = t_begin;
      for (; t + T <= t_end; t += T) {
        if constexpr (T == 1 && R >= 8)
          decode_tile<K, R, T>(c, r, t);
        else
          K::template tile<R, T>(c, r, t);
      }
      for (; t < t_end; ++t) K::template tile<R, 1>(c, r, t);
    }
    for (; r < r_end; ++r) {
      int64_t t = t_begin;
      for (; t + T <= t_end; t += T) K::template tile<1, T>(c, r, t);
      for (; t < t_end; ++t) K::template tile<1, 1>(c, r, t);
    }
  };
  if (c.split != nullptr && n_tokens <= tc) {  // the same choice on every thread of the team
    assert(c.split->items() == n_items);
    const int me = omp_get_thread_num();
    int64_t it = 0;
    while (c.split->next(me, it)) row_block(it, 0, n_tokens);
    return;
  }
  for (int64_t t_begin = 0; t_begin < n_tokens; t_begin += tc) {
    const int64_t t_end = std::min(n_tokens, t_begin + tc);
#pragma omp for schedule(static) nowait
    for (int64_t it = 0; it < n_items; ++it) row_block(it, t_begin, t_end);
  }
}

/// Whether the matmul row loops share their row blocks out with a WorkSplit: on unless
/// SNAPKV_MATMUL_STEAL=0 (then OpenMP's static schedule, as before). Read once.
inline bool matmul_steal() {
  static const bool on = work_stealing_enabled("SNAPKV_MATMUL_STEAL");
  return on;
}

/// Points c.split at `split`, reset for a product of `rows` rows, when work stealing is on
/// (matmul_steal()) and the product runs in a parallel region (`par`) of a team that
/// WorkSplit::suits; else leaves c as it is.
/// (A product of several token chunks ignores the split: tiles_loop_rt.)
inline void share_rows(TileCtx& c, int64_t rows, bool par, WorkSplit& split) {
  if (!par || !WorkSplit::suits(c.n_threads) || !matmul_steal()) return;
  split.reset((rows + kRowBlock - 1) / kRowBlock, c.n_threads);
  c.split = &split;
}

/// tiles_loop_rt with K's tile shape for n_tokens. K provides kR, kT, kRDecode and
/// template<int R, int T> tile(ctx, r0, t0). With a single token the rows are walked kRDecode
/// at a time. Several interleaved row streams are followed worse by the hardware prefetchers than
/// one sequential stream, so such tiles are kRDecode 1, the legacy types' AVX-512 16-row tile
/// that reads its rows one after another and only shares the final reduction, or the AVX2 tile of
/// 2 Q4_0 / Q4_1 / Q5_0 rows side by side, measured faster (its two FMA chains) despite two streams.
template <class K>
void tiles_loop(const TileCtx& c, int64_t rows, int64_t n_tokens) {
  if (n_tokens == 1) {
    tiles_loop_rt<K, K::kRDecode, 1>(c, rows, n_tokens);
  } else {
    tiles_loop_rt<K, K::kR, K::kT>(c, rows, n_tokens);
  }
}

/// Whether a product of this many multiply-adds is worth a parallel region.
inline bool tiles_parallel(double macs) { return macs >= kSerialMacs; }

/// Runs K over the whole product in a parallel region of c.n_threads threads (one thread for
/// small products, see kSerialMacs).
template <class K>
void run_tiles(const TileCtx& c0, int64_t rows, int64_t n_tokens) {
  const bool par =
      tiles_parallel(static_cast<double>(rows) * static_cast<double>(c0.cols) * static_cast<double>(n_tokens));
  TileCtx c = c0;
  WorkSplit split;
  share_rows(c, rows, par, split);
#pragma omp parallel num_threads(c.n_threads) if (par)
  tiles_loop<K>(c, rows, n_tokens);
}

}  // namespace snapkv::quant
