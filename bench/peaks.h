// bench_kernels: the compute peaks of one core or a few (f32 FMA, AVX512-BF16 and INT8 dot
// products, AMX-BF16 tiles), against which bench_kernels.cpp's kernel rows are read. Included by
// bench_kernels.cpp only (each bench/*.cpp is its own executable).
#pragma once

#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstdint>
#include <cstring>

#include "attention/amx.h"
#include "attention/int8_dot.h"
#include "attention/simd.h"
#include "attention/tiles_amx.h"

namespace snapkv_bench {

/// f32 FMA throughput: 12 independent accumulator chains per thread (enough to cover the FMA
/// latency on both FMA ports), 2 FLOPs per lane.
inline void BM_FmaPeak(benchmark::State& st) {
  const int threads = static_cast<int>(st.range(0));
  constexpr int64_t kIters = 1 << 22;
#if defined(__AVX512F__)
  constexpr int kLanes = 16;
#elif defined(__AVX2__) && defined(__FMA__)
  constexpr int kLanes = 8;
#else
  constexpr int kLanes = 1;
#endif
  float sink = 0;
  for (auto _ : st) {
    float total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
#if defined(__AVX512F__)
      using V = __m512;
      auto fma = [](V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); };
      const V x = _mm512_set1_ps(0.999f), y = _mm512_set1_ps(1e-7f);
      V a[12];
      for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(static_cast<float>(i));
#elif defined(__AVX2__) && defined(__FMA__)
      using V = __m256;
      auto fma = [](V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); };
      const V x = _mm256_set1_ps(0.999f), y = _mm256_set1_ps(1e-7f);
      V a[12];
      for (int i = 0; i < 12; ++i) a[i] = _mm256_set1_ps(static_cast<float>(i));
#else
      using V = float;
      auto fma = [](V a, V b, V c) { return std::fma(a, b, c); };
      const V x = 0.999f, y = 1e-7f;
      V a[12];
      for (int i = 0; i < 12; ++i) a[i] = static_cast<float>(i);
#endif
      for (int64_t it = 0; it < kIters; ++it)
        for (int i = 0; i < 12; ++i) a[i] = fma(a[i], x, y);
      float lanes[kLanes];
      for (int i = 1; i < 12; ++i) a[0] = fma(a[i], x, a[0]);
      std::memcpy(lanes, &a[0], sizeof(lanes));
      total += lanes[0];
    }
    sink += total;
  }
  benchmark::DoNotOptimize(sink);
  const double flops = static_cast<double>(st.iterations()) * threads * kIters * 12 * kLanes * 2;
  st.counters["GFLOP/s"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsRate);
}

/// AVX512-BF16 dot-product throughput (vdpbf16ps: 16 lanes x 2 products + 2 adds = 64 FLOPs per
/// instruction), 12 independent chains per thread: the ceiling of PrefillAttention::BF16.
inline void BM_Bf16DotPeak(benchmark::State& st) {
#if defined(__AVX512BF16__)
  const int threads = static_cast<int>(st.range(0));
  constexpr int64_t kIters = 1 << 22;
  float sink = 0;
  for (auto _ : st) {
    float total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
      const __m512bh x = std::bit_cast<__m512bh>(_mm512_set1_epi32(0x3F803F80));  // (1.0, 1.0)
      const __m512bh y = std::bit_cast<__m512bh>(_mm512_set1_epi32(0x33D633D6));  // ~1e-7
      __m512 a[12];
      for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(static_cast<float>(i));
      for (int64_t it = 0; it < kIters; ++it)
        for (int i = 0; i < 12; ++i) a[i] = _mm512_dpbf16_ps(a[i], x, y);
      for (int i = 1; i < 12; ++i) a[0] = _mm512_add_ps(a[0], a[i]);
      float lanes[16];
      std::memcpy(lanes, &a[0], sizeof(lanes));
      total += lanes[0];
    }
    sink += total;
  }
  benchmark::DoNotOptimize(sink);
  const double flops = static_cast<double>(st.iterations()) * threads * kIters * 12 * 64;
  st.counters["GFLOP/s"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsRate);
#else
  st.SkipWithError("built without AVX512-BF16");
#endif
}

/// The loop of the int8 peaks below: per thread, kAcc independent accumulators of vector type V,
/// each step a[i] = step(a[i], k_i), k_i the address of row i of an L1-resident kAcc x sizeof(V)
/// byte buffer whose address GCC cannot see through (so no step is loop-invariant, and no chain
/// runs through the step's own latency as it would with k taken from the accumulator); counts
/// ops_per_step ops per step as GOP/s and labels the run.
template <class V, int kAcc, class Step>
inline void int8_peak(benchmark::State& st, double ops_per_step, const char* label, Step step) {
  constexpr int kBytes = static_cast<int>(sizeof(V));
  const int threads = static_cast<int>(st.range(0));
  constexpr int64_t kIters = 1 << 22;
  int64_t sink = 0;
  for (auto _ : st) {
    int64_t total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
      alignas(64) int8_t kbuf[kAcc][kBytes];
      for (int i = 0; i < kAcc; ++i)
        for (int j = 0; j < kBytes; ++j) kbuf[i][j] = static_cast<int8_t>((i * 37 + j * 11) % 255 - 127);
      const int8_t* kp = &kbuf[0][0];
      V a[kAcc] = {};
      for (int64_t it = 0; it < kIters; ++it) {
        asm volatile("" : "+r"(kp));
        for (int i = 0; i < kAcc; ++i) a[i] = step(a[i], kp + kBytes * i);
      }
      for (int i = 0; i < kAcc; ++i) {  // lane 0 of every accumulator, so none is dead
        int32_t lane0;
        std::memcpy(&lane0, &a[i], sizeof(lane0));
        total += lane0;
      }
    }
    sink += total;
  }
  benchmark::DoNotOptimize(sink);
  const double ops = static_cast<double>(st.iterations()) * threads * kIters * kAcc * ops_per_step;
  st.counters["GOP/s"] = benchmark::Counter(ops / 1e9, benchmark::Counter::kIsRate);
  st.SetLabel(label);
}

/// Throughput of the INT8 prefill kernel's Q K^T step (prefill_int8.cpp): acc = int8_dot4(acc,
/// |q|, vpsignb(k, q)) (attention/int8_dot.h: vpmaddubsw, vpmaddwd by ones and vpaddd on AVX2, one
/// vpdpbusd on VNNI CPUs; the label names the form), 32 int8 multiply-adds (64 ops) per step, kAcc
/// independent accumulators per thread (AVX2: 6; with 8, GCC kept some on the stack: 20 % fewer
/// ops/s on Zen 3; VNNI: 12, enough for vpdpbusd's latency of ~5 cycles at 2 per cycle), k loaded
/// as int8_peak says: the ceiling of PrefillAttention::Int8's Q K^T, against FmaPeak's 2 x lanes
/// FLOPs per FMA (both count 2 ops per multiply-add).
inline void BM_Int8DotPeak(benchmark::State& st) {
#if SNAPKV_ATTN_AVX2
#if SNAPKV_INT8_DOT_VNNI
  constexpr int kAcc = 12;
#else
  constexpr int kAcc = 6;
#endif
  const __m256i qa = _mm256_set1_epi8(3), qs = _mm256_set1_epi8(-3);
  int8_peak<__m256i, kAcc>(st, 64, snapkv::attn::kInt8PrefillIsa, [&](__m256i a, const int8_t* k) {
    return snapkv::attn::int8_dot4(a, qa, _mm256_sign_epi8(_mm256_load_si256(reinterpret_cast<const __m256i*>(k)), qs));
  });
#else
  st.SkipWithError("built without AVX2");
#endif
}

/// What 512-bit int8 tiles could reach: independent 512-bit vpdpbusd (64 multiply-adds, 128 ops
/// each; AVX512-VNNI), 12 accumulators per thread, k loaded as in BM_Int8DotPeak. Without the
/// sign step: AVX-512 has no vpsignb, so such a tile would need another way to move q's signs onto
/// k. On Zen 4 (session 53) it read 406-427 GOP/s per thread against Int8DotPeak's 229.5 (the
/// signed 256-bit step; width and sign step not separated; docs/benchmarks.md, "Zen 4 again").
inline void BM_Int8DotPeak512(benchmark::State& st) {
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
  const __m512i qa = _mm512_set1_epi8(3);
  int8_peak<__m512i, 12>(st, 128, "avx512vnni-512bit", [&](__m512i a, const int8_t* k) {
    return _mm512_dpbusd_epi32(a, qa, _mm512_load_si512(reinterpret_cast<const __m512i*>(k)));
  });
#else
  st.SkipWithError("built without AVX512-VNNI");
#endif
}

/// AMX-BF16 throughput: 4 independent tile accumulators (C += A x B, 16 x 16 f32 from 16 x 32 and
/// 32 x 16 bf16) per thread, 2 x 16 x 16 x 32 = 16384 FLOPs per tdpbf16ps.
inline void BM_AmxBf16Peak(benchmark::State& st) {
#if SNAPKV_ATTN_AMX
  if (!snapkv::attn::amx_usable()) {
    st.SkipWithError("AMX is not usable here (CPU, Linux permission or SNAPKV_AMX=0)");
    return;
  }
  const int threads = static_cast<int>(st.range(0));
  constexpr int64_t kIters = 1 << 18;
  for (auto _ : st) {
#pragma omp parallel num_threads(threads)
    {
      snapkv::attn::amx::configure();
      // Nonzero operands (the power a product draws, and so the clock, can depend on the data):
      // bf16 1/128, so the sums stay small.
      alignas(64) uint16_t a[16][32];
      for (auto& row : a)
        for (auto& x : row) x = 0x3C00;
      alignas(64) float c[16][16];
      snapkv::attn::amx::memory_barrier();  // the fill above is not a dead store
      _tile_loadd(4, a, 64);
      _tile_loadd(6, a, 64);
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      for (int64_t it = 0; it < kIters; ++it) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 6);
        _tile_dpbf16ps(2, 4, 6);
        _tile_dpbf16ps(3, 4, 6);
      }
      _tile_stored(0, c, 64);
      benchmark::DoNotOptimize(c);
      _tile_release();
    }
  }
  const double flops = static_cast<double>(st.iterations()) * threads * kIters * 4 * 16384;
  st.counters["GFLOP/s"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsRate);
#else
  st.SkipWithError("built without AMX-BF16");
#endif
}

}  // namespace snapkv_bench
