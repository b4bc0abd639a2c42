// snapkv: do a core's loads from DRAM overlap its compute? The question behind decode at the
// bandwidth limit (issue 13): decode attention streams the KV cache through a few FMAs per byte.
//
//   StreamFma/fmas:X/prefetch:D/threads:T
//       streams rows of 256 bytes (a K row and a V row of 64 IEEE halves each: one SmolLM2 KV
//       entry) from a ~640 MB footprint (past the L3; each iteration reads another set), converts
//       them to f32 and spends X independent 16-lane FMAs on each row; with D > 0 each row first
//       asks for the rows D ahead (prefetcht0, 4 lines). GB/s counts the bytes streamed.
//   StreamFma/fmas:X/prefetch:0/threads:1/warm
//       the same work on one 1 MB set read again and again (cache-resident): the compute alone.
//
// If loads and compute overlapped, the cold rate would be min(bandwidth, warm rate); if they
// serialize, 1 / cold = 1 / bandwidth + 1 / warm. docs/benchmarks.md ("Decode attention: prefetch
// spread over the block") records which one this machine does, with and without prefetch.
// Run: build/bench_stream [--benchmark_min_time=0.3]
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <omp.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace {

#if defined(__AVX512F__)

constexpr size_t kRowHalves = 64;                     // one K or V row: 64 halves = 128 bytes
constexpr size_t kFootprint = size_t{640} << 20;      // bytes of all sets together (cold)
constexpr size_t kWarmBytes = size_t{1} << 20;        // one set, cache-resident (warm)
constexpr size_t kColdRowsPerSet = size_t{64} << 10;  // 64K rows = 16 MB per set

struct StreamData {
  std::vector<uint16_t> k, v;  // [sets][rows][64]
  size_t rows = 0, sets = 0;
};

const StreamData& stream_data(bool warm) {
  static StreamData cold_data, warm_data;
  StreamData& d = warm ? warm_data : cold_data;
  if (d.rows == 0) {
    d.rows = warm ? kWarmBytes / (4 * kRowHalves) : kColdRowsPerSet;
    d.sets = warm ? 1 : kFootprint / (d.rows * 4 * kRowHalves);
    d.k.assign(d.sets * d.rows * kRowHalves, 0x3C00);  // 1.0 in IEEE half
    d.v.assign(d.k.size(), 0x3800);                    // 0.5
  }
  return d;
}

inline void prefetch_l1(const uint16_t* p) { asm volatile("prefetcht0 %0" : : "m"(*reinterpret_cast<const char*>(p))); }

/// Rows [r0, r1) of one set: X FMAs per row over 12 accumulators; prefetch D rows ahead.
template <int X>
float stream_rows(const uint16_t* k, const uint16_t* v, size_t r0, size_t r1, size_t n_rows, int D) {
  __m512 acc[12];
  for (auto& a : acc) a = _mm512_setzero_ps();
  const __m512 q = _mm512_set1_ps(1.0001f);
  for (size_t r = r0; r < r1; ++r) {
    if (D > 0 && r + static_cast<size_t>(D) < n_rows) {
      const uint16_t* pk = k + (r + static_cast<size_t>(D)) * kRowHalves;
      const uint16_t* pv = v + (r + static_cast<size_t>(D)) * kRowHalves;
      prefetch_l1(pk);
      prefetch_l1(pk + 32);
      prefetch_l1(pv);
      prefetch_l1(pv + 32);
    }
    const uint16_t* kr = k + r * kRowHalves;
    const uint16_t* vr = v + r * kRowHalves;
    __m512 x[4];
    x[0] = _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kr)));
    x[1] = _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kr + 32)));
    x[2] = _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(vr)));
    x[3] = _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(vr + 32)));
#pragma GCC unroll 64
    for (int i = 0; i < X; ++i) acc[i % 12] = _mm512_fmadd_ps(q, x[i % 4], acc[i % 12]);
  }
  __m512 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  float total = 0;
  for (const float x : lanes) total += x;
  return total;
}

template <int X>
void BM_StreamFma(benchmark::State& st, int D, int threads, bool warm) {
  const StreamData& d = stream_data(warm);
  size_t set = 0;
  float sink = 0;
  for (auto _ : st) {
    const uint16_t* k = d.k.data() + set * d.rows * kRowHalves;
    const uint16_t* v = d.v.data() + set * d.rows * kRowHalves;
    float total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
      const auto t = static_cast<size_t>(omp_get_thread_num());
      const size_t per = d.rows / static_cast<size_t>(threads);
      total += stream_rows<X>(k, v, t * per, (t + 1) * per, d.rows, D);
    }
    sink += total;
    set = (set + 1) % d.sets;
  }
  benchmark::DoNotOptimize(sink);
  st.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(st.iterations()) * static_cast<double>(d.rows * 4 * kRowHalves) / 1e9,
                         benchmark::Counter::kIsRate);
}

template <int X>
void reg(int D, int threads, bool warm) {
  const std::string name =
      fmt::format("StreamFma/fmas:{}/prefetch:{}/threads:{}{}", X, D, threads, warm ? "/warm" : "");
  benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) { BM_StreamFma<X>(st, D, threads, warm); })
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
}

template <int X>
void reg_all() {
  reg<X>(0, 1, true);
  for (const int threads : {1, 2})
    for (const int D : {0, 16, 64}) reg<X>(D, threads, false);
}

[[maybe_unused]] const int registered = [] {
  reg_all<12>();
  reg_all<24>();
  reg_all<48>();
  return 0;
}();

#else

// Built without AVX-512: say so instead of exiting with an empty list.
[[maybe_unused]] const int registered = [] {
  benchmark::RegisterBenchmark("StreamFma", [](benchmark::State& st) {
    st.SkipWithError("bench_stream needs AVX-512F (build with -march=native on an AVX-512 CPU)");
    for (auto _ : st) {
    }
  });
  return 0;
}();

#endif  // __AVX512F__

}  // namespace

BENCHMARK_MAIN();
