// Split-K decode attention over many sequences (see attention/decode.h).
#include "attention/decode.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "attention/decode_q8_keys.h"
#include "attention/decode_simd.h"
#include "attention/positions.h"
#include "attention/prefill.h"
#include "attention/simd.h"
#include "attention/softmax_simd.h"
#include "core/kv_rows.h"
#include "core/prefetch.h"
#include "core/work_split.h"
#include "snapkv/error.h"

namespace snapkv {

namespace {

using attn::kNegInf;
constexpr int kKeyBlock = DecodeWorkspace::kKeyBlock;
constexpr int kMaxSplits = DecodeWorkspace::kMaxSplits;

// Q8_0 / Q4_0 caches need a dequantized key block per thread unless the AVX2 / AVX-512 tiles
// dequantize in registers.
// (SNAPKV_ATTN_AVX2 is only ever defined to 1, so it is tested with #if, never in an expression.)
#if SNAPKV_ATTN_AVX2
constexpr bool kQuantTiles = false;
#else
constexpr bool kQuantTiles = true;
#endif

/// Whether a task prefetches its K and V rows ahead (attn::KVPrefetch): on by default on Intel
/// and AMD CPUs (core/prefetch.h; on the Intel host measured: one burst per block 1.0-1.5x, the
/// spread form 1.02-1.29x more; on Zen 4 Gemma 3's decode at 6.4K tokens 1.20x; docs/benchmarks.md,
/// "Decode attention: software prefetch", "prefetch spread over the block", "Software prefetch on
/// AMD Zen 4"). SNAPKV_DECODE_PREFETCH=1 / 0 forces it on / off. Read once.
bool decode_prefetch() {
  static const bool on = software_prefetch_enabled("SNAPKV_DECODE_PREFETCH");
  return on;
}

/// How far ahead of the key being computed the prefetches run, in rows: keys 32, values 64 (the
/// values are read after the block's scores, so they get the longer lead; the AVX2 tiles of long
/// rows ask for them with the keys, attn::values_with_keys, still 64 rows ahead). 16 / 32 keys and
/// 32 / 64 / 128 values measured within noise of each other on both shapes (SmolLM2 hd 64,
/// Gemma 3 hd 256; 2026-12-03).
constexpr int kPrefetchKeys = 32;
constexpr int kPrefetchValues = 64;

/// Whether the tasks are shared out with work stealing (core/work_split.h): on unless
/// SNAPKV_DECODE_STEAL=0 (then each thread runs exactly its static share). Read once.
bool decode_steal() {
  static const bool on = work_stealing_enabled("SNAPKV_DECODE_STEAL");
  return on;
}

/// True when rows of type t are dequantized a key block at a time into a per-thread tile.
bool uses_tile(KVType t) { return kQuantTiles && kv_type_quantized(t); }

// Below ~256K multiply-adds (K.Q) a parallel region costs more than it saves; a split holds at
// least that much work too (DecodeWorkspace::min_split_keys).
constexpr int64_t kParallelMinWork = int64_t{1} << 18;
static_assert(kParallelMinWork == DecodeWorkspace::kMinSplitWork);

void check_shape(const AttentionParams& s) {
  if (s.n_head < 1 || s.n_head_kv < 1 || s.head_dim < 1 || s.n_head % s.n_head_kv != 0)
    throw Error(fmt::format("attention_decode: bad shape n_head {} n_head_kv {} head_dim {}", s.n_head, s.n_head_kv,
                            s.head_dim));
}

/// One task: the G query heads of KV head g of one row over the keys [j0, j1) of `hc`, as split
/// `split`. q: the row's queries [n_head][hd]; part: the row's partials [n_head][kMaxSplits][hd + 2].
/// Every head's slot ends as (a_s [hd], m_s, l_s); m_s = -inf and l_s = 0 when no key was seen.
/// A Q8_0 / Q4_0 cache runs with T = float on the values dequantize_kv_rows() gives: with AVX2 or
/// AVX-512 the tiles dequantize in registers (attn::Q8Rows, attn::Q4Rows; with AVX512-VNNI, Q8_0
/// keys are scored against the query rounded to int16 instead: decode_q8_keys.h); otherwise each key block's K and V
/// rows are dequantized into `tile` ([2][kKeyBlock][hd] floats; null unless uses_tile(hc.k_type())). Keys and values
/// may be of two quantized types (kv_types_combine); otherwise one type.
template <typename T>
void run_split(const AttentionParams& p, const float* q, const KVHeadCache& hc, int g, int64_t j0, int64_t j1,
               int split, bool exact, float* part, float* tile) {
  const int G = p.n_head / p.n_head_kv;
  const int hd = p.head_dim;
  const size_t slot = static_cast<size_t>(hd) + 2;
  const KVType k_type = hc.k_type();
  const KVType v_type = hc.v_type();
  const bool quant = kv_type_quantized(k_type);  // then v_type is quantized too
  // Bytes of one K row and one V row: sizeof(T) * hd for F16 / F32.
  const size_t k_rb = hc.k_row_bytes();
  const size_t v_rb = hc.v_row_bytes();
  auto slot_of = [&](int hh) { return part + (static_cast<size_t>(g * G + hh) * kMaxSplits + split) * slot; };
  for (int hh = 0; hh < G; ++hh) {
    float* a = slot_of(hh);
    std::fill(a, a + hd, 0.0f);
    a[hd] = kNegInf;
    a[hd + 1] = 0.0f;
  }
  alignas(64) float S[attn::kHeadTile * kKeyBlock];  // scores, then e^(s - m), of one head tile
  const float* qh[attn::kHeadTile];
  float* acc[attn::kHeadTile];
  // The online-softmax update of the nh heads of a tile from their scores S (then e^(s - m')).
  auto softmax = [&](int nh, int nk) {
    for (int t = 0; t < nh; ++t) {
      float* Sr = S + t * kKeyBlock;
      float& m = acc[t][hd];
      float& l = acc[t][hd + 1];
      const float bm = attn::row_max(Sr, nk);
      if (bm == kNegInf) {  // every score -inf: nothing to add
        std::fill(Sr, Sr + nk, 0.0f);
        continue;
      }
      const float m_new = std::max(m, bm);
      double lsum = l;
      if (m != kNegInf && m_new > m) {  // a new maximum: rescale what was accumulated
        const float corr = std::exp(m - m_new);
        lsum *= static_cast<double>(corr);
        attn::scale_f32(acc[t], corr, hd);
      }
      lsum += attn::exp_sum_block(Sr, nk, m_new);
      m = m_new;
      l = static_cast<float>(lsum);
    }
  };
  // The block's head tiles: scores(nh, first) fills S, the softmax update, then pv(nh, first) adds
  // e^(s - m') V; `first`: the block's first head tile (the one that asks for the rows ahead).
  int tile_h0 = 0;  // first head of the tile being scored
  auto block = [&](int nk, auto&& scores, auto&& pv) {
    for (int h0 = 0; h0 < G; h0 += attn::kHeadTile) {
      const int nh = std::min(attn::kHeadTile, G - h0);
      tile_h0 = h0;
      for (int t = 0; t < nh; ++t) {
        qh[t] = q + static_cast<size_t>(g * G + h0 + t) * hd;
        acc[t] = slot_of(h0 + t);
      }
      scores(nh, h0 == 0);
      softmax(nh, nk);
      pv(nh, h0 == 0);
    }
  };
#if defined(SNAPKV_DECODE_Q8_KEYS_I16)
  // The queries of a head tile rounded to int16 for Q8_0 keys, set at the tile's first block: one
  // slot per tile for the first two (G <= 8), the slot of the second set again whenever a later
  // tile takes it. rows: the rows query_i16_set took (bit t: head tile_h0 + t). Only the f32
  // instantiation (Q8_0 / Q4_0 caches) holds them (12.8 KB); the F16 one never uses them.
  struct Q8KeyQueries {
    attn::QueryI16 q16[2];
    int h0[2] = {-1, -1};
    unsigned rows[2] = {0, 0};
  };
  static_assert(attn::kHeadTile <= attn::kQueryI16Heads);
  std::conditional_t<std::is_same_v<T, float>, Q8KeyQueries, char> qc;
  (void)qc;
#endif
  const bool prefetch = decode_prefetch();
  for (int64_t kb = j0; kb < j1; kb += kKeyBlock) {
    const int nk = static_cast<int>(std::min<int64_t>(kKeyBlock, j1 - kb));
    // Rows ahead for the tiles to ask for as they go: the hardware prefetchers alone left a
    // 16K-key decode at 6-9 GB/s per core, with loads and compute hardly overlapping.
    attn::KVPrefetch ahead;
    if (prefetch) {  // pointers formed only to rows the split has (n_k / n_v > 0)
      ahead.k_rb = k_rb;
      ahead.v_rb = v_rb;
      ahead.n_k = static_cast<int>(std::max<int64_t>(0, j1 - kb - kPrefetchKeys));
      ahead.n_v = static_cast<int>(std::max<int64_t>(0, j1 - kb - kPrefetchValues));
      if (ahead.n_k > 0)
        ahead.k = static_cast<const char*>(hc.k_data()) + static_cast<size_t>(kb + kPrefetchKeys) * k_rb;
      if (ahead.n_v > 0)
        ahead.v = static_cast<const char*>(hc.v_data()) + static_cast<size_t>(kb + kPrefetchValues) * v_rb;
    }
    const attn::KVPrefetch* pf = prefetch ? &ahead : nullptr;
    const T* Kb = nullptr;
    const T* Vb = nullptr;
    if (!quant) {
      Kb = static_cast<const T*>(hc.k_data()) + kb * hd;
      Vb = static_cast<const T*>(hc.v_data()) + kb * hd;
    } else if constexpr (std::is_same_v<T, float>) {
      const auto* Kq = static_cast<const uint8_t*>(hc.k_data()) + static_cast<size_t>(kb) * k_rb;
      const auto* Vq = static_cast<const uint8_t*>(hc.v_data()) + static_cast<size_t>(kb) * v_rb;
#if SNAPKV_ATTN_AVX2
      auto in_registers = [&](const auto& Kr, const auto& Vr) {
        block(
            nk,
            [&](int nh, bool first) {
#if defined(SNAPKV_DECODE_Q8_KEYS_I16)
              // Q8_0 keys: int16 queries and integer dot products (decode_q8_keys.h); a query row
              // with NaN, inf or a magnitude above 3e38 is scored by the f32 tiles on its own.
              if constexpr (std::is_same_v<std::decay_t<decltype(Kr)>, attn::Q8Rows>) {
                if (attn::decode_q8_keys_i16()) {
                  const int qs = std::min(tile_h0 / attn::kHeadTile, 1);
                  if (qc.h0[qs] != tile_h0) {
                    qc.rows[qs] = attn::query_i16_set(qh, nh, hd, qc.q16[qs]);
                    qc.h0[qs] = tile_h0;
                  }
                  const unsigned rows = qc.rows[qs];
                  if (rows == (1u << nh) - 1)
                    return attn::scores_rows_q8_i16(qc.q16[qs], 0, nh, Kq, k_rb, nk, hd, p.scale, S, kKeyBlock,
                                                    first ? pf : nullptr);
                  if (rows != 0) {  // some rows refused: each head on its own path
                    for (int t = 0; t < nh; ++t) {
                      const attn::KVPrefetch* pt = first && t == 0 ? pf : nullptr;
                      if ((rows >> t) & 1u)
                        attn::scores_rows_q8_i16(qc.q16[qs], t, 1, Kq, k_rb, nk, hd, p.scale, S + t * kKeyBlock,
                                                 kKeyBlock, pt);
                      else
                        attn::scores_rows(qh + t, 1, Kr, nk, hd, p.scale, S + t * kKeyBlock, kKeyBlock, pt);
                    }
                    return;
                  }  // none taken (head_dim > 512, or every row refused): the f32 tiles below
                }
              }
#endif
              attn::scores_rows(qh, nh, Kr, nk, hd, p.scale, S, kKeyBlock, first ? pf : nullptr);
            },
            [&](int nh, bool first) { attn::pv_rows(S, kKeyBlock, nh, Vr, nk, hd, acc, first ? pf : nullptr); });
      };
      auto with_values = [&](const auto& Kr) {
        if (v_type == KVType::Q8_0)
          in_registers(Kr, attn::Q8Rows{Vq, v_rb});
        else
          in_registers(Kr, attn::Q4Rows{Vq, v_rb});
      };
      if (k_type == KVType::Q8_0)
        with_values(attn::Q8Rows{Kq, k_rb});
      else
        with_values(attn::Q4Rows{Kq, k_rb});
      continue;
#endif
      dequantize_kv_rows(k_type, Kq, tile, nk, hd);
      dequantize_kv_rows(v_type, Vq, tile + kKeyBlock * hd, nk, hd);
      Kb = tile;
      Vb = tile + kKeyBlock * hd;
    }
    block(
        nk,
        [&](int nh, bool first) {
          attn::scores_block(qh, nh, Kb, nk, hd, p.scale, exact, S, kKeyBlock, first ? pf : nullptr);
        },
        [&](int nh, bool first) { attn::pv_block(S, kKeyBlock, nh, Vb, nk, hd, acc, first ? pf : nullptr); });
  }
}

}  // namespace

int64_t DecodeWorkspace::min_split_keys(int group, int head_dim) {
  const int64_t per_key = std::max<int64_t>(1, int64_t{group} * head_dim);
  return std::clamp<int64_t>(kMinSplitWork / per_key / kKeyBlock * kKeyBlock, kKeyBlock, kMaxMinSplitKeys);
}

int DecodeWorkspace::n_splits(int64_t nk, int64_t min_keys) {
  if (nk <= 0) return 0;
  const int64_t len = split_keys(nk, min_keys);
  return static_cast<int>((nk + len - 1) / len);
}

int64_t DecodeWorkspace::split_keys(int64_t nk, int64_t min_keys) {
  if (nk <= 0) return kKeyBlock;
  min_keys = std::max<int64_t>(1, min_keys);
  const int64_t want = std::clamp<int64_t>((nk + min_keys - 1) / min_keys, 1, kMaxSplits);
  const int64_t len = (nk + want - 1) / want;
  return (len + kKeyBlock - 1) / kKeyBlock * kKeyBlock;
}

DecodeWorkspace::DecodeWorkspace(const AttentionParams& shape, int64_t max_rows) : shape_(shape), max_rows_(max_rows) {
  check_shape(shape);
  if (max_rows < 1) throw Error(fmt::format("attention_decode: workspace for {} rows (must be >= 1)", max_rows));
  const auto R = static_cast<size_t>(max_rows);
  const auto nh = static_cast<size_t>(shape.n_head);
  const auto hd = static_cast<size_t>(shape.head_dim);
  const size_t rg = R * static_cast<size_t>(shape.n_head_kv);
  partial_.resize(R * nh * kMaxSplits * (hd + 2));
  q16_.resize(R * nh * hd);
  j_begin_.resize(rg);
  j_end_.resize(rg);
  task_off_.resize(rg + 1);
  task_key_.resize(rg * kMaxSplits + 1);
}

size_t DecodeWorkspace::bytes() const {
  return sizeof(float) * (partial_.size() + q16_.size() + quant_tile_.size()) +
         sizeof(int64_t) * (j_begin_.size() + j_end_.size() + task_off_.size() + task_key_.size());
}

size_t DecodeWorkspace::bytes_for(const AttentionParams& shape, int64_t max_rows) {
  const auto R = static_cast<size_t>(max_rows);
  const auto nh = static_cast<size_t>(shape.n_head);
  const auto hd = static_cast<size_t>(shape.head_dim);
  const size_t rg = R * static_cast<size_t>(shape.n_head_kv);
  return 4 * R * nh * (kMaxSplits * (hd + 2) + hd) + 8 * (3 * rg + 1) + 8 * (rg * kMaxSplits + 1);
}

void attention_decode(const AttentionParams& p, std::span<const DecodeQuery> rows, DecodeWorkspace& ws, int n_threads) {
  check_shape(p);
  const AttentionParams& w = ws.shape_;
  if (p.n_head != w.n_head || p.n_head_kv != w.n_head_kv || p.head_dim != w.head_dim)
    throw Error(
        fmt::format("attention_decode: workspace made for n_head {} n_head_kv {} head_dim {}, called with {} {} {}",
                    w.n_head, w.n_head_kv, w.head_dim, p.n_head, p.n_head_kv, p.head_dim));
  const auto R = static_cast<int64_t>(rows.size());
  if (R > ws.max_rows_)
    throw Error(fmt::format("attention_decode: {} rows exceed the workspace's {}", R, ws.max_rows_));
  if (n_threads < 1) throw Error(fmt::format("attention_decode: thread count {} must be >= 1", n_threads));
  if (R == 0) return;

  const int Hkv = p.n_head_kv;
  const int G = p.n_head / Hkv;
  const int hd = p.head_dim;
  const int64_t min_keys = DecodeWorkspace::min_split_keys(G, hd);
  const size_t row_q = static_cast<size_t>(p.n_head) * static_cast<size_t>(hd);
  int64_t* JB = ws.j_begin_.data();
  int64_t* JE = ws.j_end_.data();
  int64_t* off = ws.task_off_.data();
  off[0] = 0;
  int64_t visible = 0;
  bool any_tile = false;
  for (int64_t r = 0; r < R; ++r) {
    const DecodeQuery& row = rows[static_cast<size_t>(r)];
    if (row.q == nullptr || row.out == nullptr || row.cache == nullptr)
      throw Error(fmt::format("attention_decode: row {} has a null q, out or cache", r));
    const KVLayerCache& c = *row.cache;
    if (static_cast<int>(c.heads.size()) != Hkv)
      throw Error(
          fmt::format("attention_decode: row {}: cache has {} heads, expected n_head_kv {}", r, c.heads.size(), Hkv));
    for (int g = 0; g < Hkv; ++g) {
      const KVHeadCache& hc = c.heads[static_cast<size_t>(g)];
      if (hc.head_dim() != hd)
        throw Error(fmt::format("attention_decode: row {}: cache head {} has head_dim {}, expected {}", r, g,
                                hc.head_dim(), hd));
      if (hc.k_type() != c.heads[0].k_type() || hc.v_type() != c.heads[0].v_type())
        throw Error(fmt::format("attention_decode: row {}: cache heads 0 and {} have different element types", r, g));
      const size_t i = static_cast<size_t>(r * Hkv + g);
      JE[i] = attn::upper_index(hc.pos_data(), hc.size(), row.pos);
      JB[i] = p.window > 0 ? attn::lower_index(hc.pos_data(), JE[i], int64_t{row.pos} - p.window + 1) : 0;
      visible += JE[i] - JB[i];
      off[i + 1] = off[i] + DecodeWorkspace::n_splits(JE[i] - JB[i], min_keys);
    }
    any_tile = any_tile || uses_tile(c.heads[0].k_type());
    // ggml converts the f32 operand of an F16 mat-mul to F16: round the queries the same way.
    if (c.heads[0].k_type() == KVType::F16)
      attn::round_f16_row(row.q, ws.q16_.data() + static_cast<size_t>(r) * row_q, static_cast<int64_t>(row_q));
  }

  const int64_t n_rg = R * Hkv;
  const int64_t n_tasks = off[n_rg];
  // Keys of the tasks before each task (its split's length; the last split of a head may be
  // shorter): the threads' shares below.
  int64_t* task_key = ws.task_key_.data();
  task_key[0] = 0;
  for (int64_t i = 0; i < n_rg; ++i) {
    const int64_t len = DecodeWorkspace::split_keys(JE[i] - JB[i], min_keys);
    for (int64_t t = off[i]; t < off[i + 1]; ++t) {
      const int64_t j0 = JB[i] + (t - off[i]) * len;
      task_key[t + 1] = task_key[t] + (std::min(JE[i], j0 + len) - j0);
    }
  }
  const bool par = n_threads > 1 && n_tasks > 1 && visible * G * hd >= kParallelMinWork;
  float* partial = ws.partial_.data();
  const size_t slot = static_cast<size_t>(hd) + 2;
  const size_t row_part = static_cast<size_t>(p.n_head) * kMaxSplits * slot;
  const float* q16 = ws.q16_.data();
  const size_t tile_floats = 2 * static_cast<size_t>(kKeyBlock) * static_cast<size_t>(hd);
  if (any_tile && ws.quant_tile_.size() < static_cast<size_t>(n_threads) * tile_floats)
    ws.quant_tile_.resize(static_cast<size_t>(n_threads) * tile_floats);  // before the parallel region
  float* quant_tiles = ws.quant_tile_.data();

  // Thread t of T runs the tasks whose middle key (counted over all tasks, in task order) lies
  // in [total * t / T, total * (t + 1) / T): about equal keys per thread, and consecutive splits
  // of a head on one thread, so that its K and V reads run on through the split boundaries.
  // Handing out one task at a time (schedule(dynamic, 1)) had the two threads read neighbouring
  // splits: decode at 16K tokens of the SmolLM2-shaped model ran at 42.6-50.8 tok/s against
  // 53.7-55.4 this way (4 alternating pairs; docs/benchmarks.md, "Decode attention: each
  // thread's splits in one piece"). The output does not depend on which thread runs a task.
  // Every task holds a key, so the middles (task_key[i] + task_key[i + 1]) / 2 increase strictly:
  // the shares are contiguous and cover every task once; compared doubled and times T, exactly.
  const int64_t total = task_key[n_tasks];
  auto first_task_from = [&](int64_t t, int64_t T) {  // the first task whose middle key is at or after total * t / T
    int64_t lo = 0, hi = n_tasks;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (T * (task_key[mid] + task_key[mid + 1]) < 2 * total * t)
        lo = mid + 1;
      else
        hi = mid;
    }
    return lo;
  };
  // With work stealing (decode_steal()) these shares are WorkSplit ranges: a thread that is done
  // takes the last tasks of a slower thread's share (core/work_split.h).
  // (Teams WorkSplit::suits; wider ones keep the static shares.)
  WorkSplit shares;
  const bool steal = par && WorkSplit::suits(n_threads) && decode_steal();
  if (steal)
    shares.reset_at(n_threads, [&](int t) { return t == n_threads ? n_tasks : first_task_from(t, n_threads); });

#pragma omp parallel num_threads(n_threads) if (par)
  {
    auto run_task = [&](int64_t task) {
      const int64_t i = std::upper_bound(off, off + n_rg + 1, task) - off - 1;
      const int64_t r = i / Hkv;
      const int g = static_cast<int>(i % Hkv);
      const auto split = static_cast<int>(task - off[i]);
      const KVHeadCache& hc = rows[static_cast<size_t>(r)].cache->heads[static_cast<size_t>(g)];
      const int64_t len = DecodeWorkspace::split_keys(JE[i] - JB[i], min_keys);
      const int64_t j0 = JB[i] + split * len;
      const int64_t j1 = std::min(JE[i], j0 + len);
      float* part = partial + static_cast<size_t>(r) * row_part;
      if (hc.k_type() == KVType::F16) {  // kv_types_combine: the values are F16 too
        run_split<uint16_t>(p, q16 + static_cast<size_t>(r) * row_q, hc, g, j0, j1, split, hd < attn::kExactDotBelow,
                            part, nullptr);
      } else if (kv_type_quantized(hc.k_type())) {  // and the values quantized too
        float* tile =
            uses_tile(hc.k_type()) ? quant_tiles + static_cast<size_t>(omp_get_thread_num()) * tile_floats : nullptr;
        run_split<float>(p, rows[static_cast<size_t>(r)].q, hc, g, j0, j1, split, false, part, tile);
      } else {
        run_split<float>(p, rows[static_cast<size_t>(r)].q, hc, g, j0, j1, split, false, part, nullptr);
      }
    };
    const auto me = static_cast<int64_t>(omp_get_thread_num());
    if (steal) {
      int64_t task = 0;
      while (shares.next(static_cast<int>(me), task)) run_task(task);
    } else {
      const auto n_team = static_cast<int64_t>(omp_get_num_threads());
      const int64_t last = me + 1 == n_team ? n_tasks : first_task_from(me + 1, n_team);
      for (int64_t task = first_task_from(me, n_team); task < last; ++task) run_task(task);
    }
#pragma omp barrier
    // Combine the splits of every (row, query head), in split order.
#pragma omp for schedule(static)
    for (int64_t rh = 0; rh < R * p.n_head; ++rh) {
      const int64_t r = rh / p.n_head;
      const int h = static_cast<int>(rh % p.n_head);
      const int64_t i = r * Hkv + h / G;
      const int ns = static_cast<int>(off[i + 1] - off[i]);
      float* o = rows[static_cast<size_t>(r)].out + static_cast<size_t>(h) * hd;
      const float* a = partial + static_cast<size_t>(r) * row_part + static_cast<size_t>(h) * kMaxSplits * slot;
      float M = kNegInf;
      for (int s = 0; s < ns; ++s) M = std::max(M, a[s * slot + hd]);
      double L = 0.0;
      if (M != kNegInf)
        for (int s = 0; s < ns; ++s)
          L += std::exp(static_cast<double>(a[s * slot + hd]) - M) * static_cast<double>(a[s * slot + hd + 1]);
      std::fill(o, o + hd, 0.0f);
      if (!(L > 0.0)) continue;  // no visible key
      for (int s = 0; s < ns; ++s) {
        const float c = static_cast<float>(std::exp(static_cast<double>(a[s * slot + hd]) - M) / L);
        if (c != 0.0f) attn::axpy_f32(o, c, a + s * slot, hd);
      }
    }
  }
}

}  // namespace snapkv
