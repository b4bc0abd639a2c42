// snapkv: would K^T tiles make decode attention faster? (issue 13; attention/decode_ktiles.h)
//
// One thread, cache-resident keys (1,024 per KV head, read again and again): the compute side of
// the decode kernel, where the row layout spends a third of its time on horizontal sums.
//
//   KTiles/scores/{rows,ktiles,ktiles64}/{smollm2,gemma3}
//       only the Q.K scores of every 64-key block (SmolLM2: 3 query heads per KV head, head_dim 64,
//       3 KV heads; Gemma 3: 4 / 256 / 1), rows: scores_rows over F16 key rows (today's kernel),
//       ktiles: scores_ktile over the same keys as K^T tiles (the same bits); ktiles64 (AVX-512):
//       scores_ktile64 over the block's four tiles at once, in the natural order (other bits).
//   KTiles/block/{rows,ktiles,ktiles64}/{smollm2,gemma3}
//       the whole per-block work of one decode split as attention/decode.cpp runs it: scores, the
//       online softmax (row_max, rescale, exp_sum_block) and the P.V sums (pv_rows), so the ratio
//       is the kernel's, not the scores'.
//   KTiles/{softmax,pv}/rows/{smollm2,gemma3}
//       one part of the block alone, on the scores of the same keys (copied into the block's score
//       buffer first, 4 bytes a head and key, as every step of the timed loop): the online softmax,
//       or the P.V sums. scores + softmax + pv ~ block (the copy counted twice) says where the
//       kernel's cycles go, without its software prefetch (run_split's KVPrefetch is not used).
//
// GB/s counts the K (and, for block, V) bytes of the keys, as DecodeAttn in bench_kernels does:
// scores and block only; softmax and pv report time/key/KVhead alone.
// Run: build/bench_ktiles [--benchmark_min_time=0.5]
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "attention/decode_ktiles.h"
#include "attention/decode_simd.h"
#include "attention/simd.h"
#include "attention/softmax_simd.h"
#include "core/fp16.h"

namespace {

using namespace snapkv::attn;

#if SNAPKV_ATTN_AVX2

constexpr int kKeys = 1024;  // per KV head
constexpr int kBlock = 64;   // keys per online-softmax block (DecodeWorkspace::kKeyBlock)

struct Shape {
  const char* name;
  int G;     // query heads per KV head
  int hd;    // head_dim
  int n_kv;  // KV heads
};

struct Data {
  std::vector<float> q;           // [n_kv][G][hd], F16-rounded
  std::vector<uint16_t> k_rows;   // [n_kv][kKeys][hd]
  std::vector<uint16_t> k_tiles;  // [n_kv][kKeys / 16][hd][16]
  std::vector<uint16_t> v_rows;   // [n_kv][kKeys][hd]
};

const Data& data_for(const Shape& s) {
  static std::vector<std::pair<std::string, Data>> cache;
  for (const auto& [name, d] : cache)
    if (name == s.name) return d;
  Data d;
  std::mt19937 rng(42);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const auto nq = static_cast<size_t>(s.n_kv) * s.G * s.hd;
  const auto nk = static_cast<size_t>(s.n_kv) * kKeys * s.hd;
  d.q.resize(nq);
  for (float& x : d.q) x = snapkv::fp16_to_fp32(snapkv::fp32_to_fp16(nd(rng)));
  d.k_rows.resize(nk);
  d.v_rows.resize(nk);
  for (auto& x : d.k_rows) x = snapkv::fp32_to_fp16(nd(rng));
  for (auto& x : d.v_rows) x = snapkv::fp32_to_fp16(nd(rng));
  d.k_tiles.resize(nk);
  for (int g = 0; g < s.n_kv; ++g)
    for (int t = 0; t < kKeys / kKTileKeys; ++t) {
      const size_t off = (static_cast<size_t>(g) * kKeys + static_cast<size_t>(t) * kKTileKeys) * s.hd;
      pack_ktile(d.k_rows.data() + off, kKTileKeys, s.hd, d.k_tiles.data() + off);
    }
  cache.emplace_back(s.name, std::move(d));
  return cache.back().second;
}

/// Which scores kernel a benchmark runs (the file comment).
enum class Kernel { kRows, kKTiles, kKTiles64 };

/// The scores of the G heads of KV head g over keys [kb, kb + kBlock) into S [G][kBlock].
void block_scores(const Shape& s, const Data& d, int g, int kb, Kernel kernel, const float* const* qh, float* S) {
  const float scale = 0.125f;
  for (int h0 = 0; h0 < s.G; h0 += kHeadTile) {
    const int nh = std::min(kHeadTile, s.G - h0);
    float* Sh = S + h0 * kBlock;
    const size_t base = (static_cast<size_t>(g) * kKeys + static_cast<size_t>(kb)) * s.hd;
#if SNAPKV_ATTN_AVX512
    static_assert(kBlock == kKTileKeys * kKTilesPerBlock);
    if (kernel == Kernel::kKTiles64) {
      scores_ktile64_heads(qh + h0, nh, d.k_tiles.data() + base, s.hd, scale, Sh, kBlock);
      continue;
    }
#endif
    if (kernel != Kernel::kRows) {
      for (int t = 0; t < kBlock; t += kKTileKeys)
        scores_ktile_heads(qh + h0, nh, d.k_tiles.data() + base + static_cast<size_t>(t) * s.hd, s.hd, scale, Sh + t,
                           kBlock);
    } else {
      scores_rows(qh + h0, nh, DenseRows<uint16_t>{d.k_rows.data() + base, s.hd}, kBlock, s.hd, scale, Sh, kBlock);
    }
  }
}

/// What one benchmark times: the scores, the whole block, or one part of it alone.
enum class Part { kScoresOnly, kWholeBlock, kSoftmaxOnly, kPvOnly };

/// The online-softmax update of the G heads of a block, as run_split's (no masked rows here).
void block_softmax(const Shape& s, float* S, float* const* accp) {
  for (int h = 0; h < s.G; ++h) {
    float* Sr = S + h * kBlock;
    float* a = accp[h];
    const float m_new = std::max(a[s.hd], row_max(Sr, kBlock));
    double lsum = a[s.hd + 1];
    if (a[s.hd] != kNegInf && m_new > a[s.hd]) {
      const float corr = std::exp(a[s.hd] - m_new);
      lsum *= static_cast<double>(corr);
      scale_f32(a, corr, s.hd);
    }
    a[s.hd + 1] = static_cast<float>(lsum + exp_sum_block(Sr, kBlock, m_new));
    a[s.hd] = m_new;
  }
}

void run(benchmark::State& st, const Shape& s, Kernel kernel, Part part) {
  const Data& d = data_for(s);
  std::vector<const float*> qh(static_cast<size_t>(s.G));
  std::vector<float> S(static_cast<size_t>(s.G) * kBlock);
  std::vector<float> acc(static_cast<size_t>(s.G) * (s.hd + 2));
  std::vector<float*> accp(static_cast<size_t>(s.G));
  auto reset = [&](int g) {
    for (int h = 0; h < s.G; ++h) {
      qh[static_cast<size_t>(h)] = d.q.data() + (static_cast<size_t>(g) * s.G + h) * s.hd;
      accp[static_cast<size_t>(h)] = acc.data() + static_cast<size_t>(h) * (s.hd + 2);
      std::fill(accp[static_cast<size_t>(h)], accp[static_cast<size_t>(h)] + s.hd, 0.0f);
      accp[static_cast<size_t>(h)][s.hd] = kNegInf;
      accp[static_cast<size_t>(h)][s.hd + 1] = 0.0f;
    }
  };
  // The scores of every block, for the parts timed alone ([n_kv][kKeys / kBlock][G][kBlock]).
  const size_t block_floats = S.size();
  std::vector<float> scores;
  if (part == Part::kSoftmaxOnly || part == Part::kPvOnly) {
    scores.resize(static_cast<size_t>(s.n_kv) * (kKeys / kBlock) * block_floats);
    for (int g = 0; g < s.n_kv; ++g) {
      reset(g);
      for (int kb = 0; kb < kKeys; kb += kBlock)
        block_scores(s, d, g, kb, Kernel::kRows, qh.data(),
                     scores.data() + (static_cast<size_t>(g) * (kKeys / kBlock) + kb / kBlock) * block_floats);
    }
  }
  float sink = 0.0f;
  for (auto _ : st) {
    for (int g = 0; g < s.n_kv; ++g) {
      reset(g);
      for (int kb = 0; kb < kKeys; kb += kBlock) {
        if (part == Part::kScoresOnly || part == Part::kWholeBlock) {
          block_scores(s, d, g, kb, kernel, qh.data(), S.data());
        } else {
          const float* src = scores.data() + (static_cast<size_t>(g) * (kKeys / kBlock) + kb / kBlock) * block_floats;
          std::copy(src, src + block_floats, S.begin());
        }
        if (part == Part::kScoresOnly) continue;
        if (part != Part::kPvOnly) block_softmax(s, S.data(), accp.data());
        if (part == Part::kSoftmaxOnly) continue;
        const uint16_t* V = d.v_rows.data() + (static_cast<size_t>(g) * kKeys + static_cast<size_t>(kb)) * s.hd;
        for (int h0 = 0; h0 < s.G; h0 += kHeadTile)
          pv_rows(S.data() + h0 * kBlock, kBlock, std::min(kHeadTile, s.G - h0), DenseRows<uint16_t>{V, s.hd}, kBlock,
                  s.hd, accp.data() + h0);
      }
      // Every head's output kept alive, not only the first's.
      benchmark::DoNotOptimize(part == Part::kScoresOnly ? S.data() : acc.data());
      benchmark::ClobberMemory();
      sink += part == Part::kScoresOnly ? S[0] : acc[0];
    }
  }
  benchmark::DoNotOptimize(sink);
  const double bytes_per_iter = static_cast<double>(s.n_kv) * kKeys * s.hd * 2 * (part == Part::kWholeBlock ? 2 : 1);
  if (part == Part::kScoresOnly || part == Part::kWholeBlock)
    st.counters["GB/s"] =
        benchmark::Counter(static_cast<double>(st.iterations()) * bytes_per_iter / 1e9, benchmark::Counter::kIsRate);
  st.counters["time/key/KVhead"] = benchmark::Counter(static_cast<double>(st.iterations()) * s.n_kv * kKeys,
                                                      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

[[maybe_unused]] const int registered = [] {
  static const Shape shapes[] = {{"smollm2", 3, 64, 3}, {"gemma3", 4, 256, 1}};
  const std::pair<const char*, Part> parts[] = {{"scores", Part::kScoresOnly},
                                                {"block", Part::kWholeBlock},
                                                {"softmax", Part::kSoftmaxOnly},
                                                {"pv", Part::kPvOnly}};
  static const std::vector<std::pair<const char*, Kernel>> kernels = {
      {"rows", Kernel::kRows},
      {"ktiles", Kernel::kKTiles},
#if SNAPKV_ATTN_AVX512
      {"ktiles64", Kernel::kKTiles64},
#endif
  };
  for (const auto& [what, part] : parts)
    for (const Shape& s : shapes)
      for (const auto& [kname, kernel] : kernels) {
        if (kernel != Kernel::kRows && (part == Part::kSoftmaxOnly || part == Part::kPvOnly))
          continue;  // the layout of the keys only
        const std::string name = fmt::format("KTiles/{}/{}/{}", what, kname, s.name);
        benchmark::RegisterBenchmark(name.c_str(), [&s, kernel = kernel, part = part](benchmark::State& st) {
          run(st, s, kernel, part);
        })->Unit(benchmark::kMicrosecond);
      }
  return 0;
}();

#else

// Built without AVX2: say so instead of exiting with an empty list.
[[maybe_unused]] const int registered = [] {
  benchmark::RegisterBenchmark("KTiles", [](benchmark::State& st) {
    st.SkipWithError("bench_ktiles needs AVX2 or AVX-512F (build with -march=native)");
    for (auto _ : st) {
    }
  });
  return 0;
}();

#endif

}  // namespace

BENCHMARK_MAIN();
