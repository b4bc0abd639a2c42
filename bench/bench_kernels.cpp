// snapkv micro-benchmarks of the quant kernels (Google Benchmark).
//
//   MemRead/threads:T           streaming read of a 1 GiB buffer: the machine's memory
//                               bandwidth, the ceiling of decode (bytes_per_second)
//   Decode/<type>/<what>/<rows>x<cols>/threads:T
//                               matmul with n_tokens = 1; GB/s counts weight bytes
//   Prefill/<type>/<what>/<rows>x<cols>/n:N/threads:T
//                               matmul with n_tokens = N; GFLOP/s = 2*rows*cols*N / time
// Shapes: Gemma 3 270M Q4_K_M (n_embd 640, n_ff 2048, q 1024 rows, k/v 256, vocab 262144 Q8_0)
// with its tensor types, the synthetic SmolLM2-shaped Q8_0 model (576 / 1536 / 49152), and
// large "stream" matrices (> L3) per type to measure memory-bound decode.
// Counters are computed from wall time; on a shared machine compare the cpu_time column
// (single-thread runs) or use repetitions and the "_min" aggregate.
// Run: build/bench_kernels [--benchmark_filter=Decode] [--benchmark_min_time=0.1]
//        [--benchmark_repetitions=5 --benchmark_report_aggregates_only=true]  (see "_min")
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "core/ggml_type.h"
#include "quant/quant.h"

namespace {

using snapkv::GGMLType;

/// Random quants with small f16 scales (never NaN/Inf), like a real quantized tensor.
std::vector<uint8_t> make_weights(GGMLType t, int64_t rows, int64_t cols) {
  const auto& tr = snapkv::ggml_type_traits(static_cast<uint32_t>(t));
  const size_t bytes = snapkv::ggml_row_bytes(t, cols) * static_cast<size_t>(rows);
  std::vector<uint8_t> w(bytes);
  std::mt19937_64 rng(static_cast<uint64_t>(rows * 31 + cols));
  for (size_t i = 0; i + 8 <= bytes; i += 8) {
    const uint64_t v = rng();
    std::memcpy(&w[i], &v, 8);
  }
  auto put16 = [&](size_t off, uint16_t v) { std::memcpy(&w[off], &v, 2); };
  const uint16_t small = snapkv::fp32_to_fp16(0.003f);
  for (size_t b = 0; b < bytes / tr.type_size; ++b) {
    const size_t o = b * tr.type_size;
    switch (t) {
      case GGMLType::F32: {
        const float f = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) * 1e-3f;
        std::memcpy(&w[o], &f, 4);
        break;
      }
      case GGMLType::F16:
        put16(o, snapkv::fp32_to_fp16(static_cast<float>(static_cast<int>(rng() % 2001) - 1000) * 1e-3f));
        break;
      case GGMLType::BF16:
        put16(o, static_cast<uint16_t>(0x3c00 + rng() % 256));
        break;
      case GGMLType::Q6_K:
        put16(o + 208, small);
        break;
      case GGMLType::Q4_1:
      case GGMLType::Q5_1:
      case GGMLType::Q4_K:
      case GGMLType::Q5_K:
        put16(o, small);
        put16(o + 2, small);
        break;
      default:  // Q4_0, Q5_0, Q8_0: d first
        put16(o, small);
        break;
    }
  }
  return w;
}

const std::vector<uint8_t>& weights(GGMLType t, int64_t rows, int64_t cols) {
  static std::map<std::tuple<uint32_t, int64_t, int64_t>, std::unique_ptr<std::vector<uint8_t>>> cache;
  auto& slot = cache[{static_cast<uint32_t>(t), rows, cols}];
  if (!slot) slot = std::make_unique<std::vector<uint8_t>>(make_weights(t, rows, cols));
  return *slot;
}

std::vector<float> make_x(int64_t n) {
  std::vector<float> x(static_cast<size_t>(n));
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (auto& v : x) v = g(rng);
  return x;
}

void BM_MemRead(benchmark::State& st) {
  const int threads = static_cast<int>(st.range(0));
  const size_t n = (size_t{1} << 30) / sizeof(uint64_t);
  static std::vector<uint64_t> buf;
  if (buf.empty()) {
    buf.resize(n);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; ++i) buf[i] = i * 0x9E3779B97F4A7C15ull;
  }
  uint64_t sink = 0;
  for (auto _ : st) {
    uint64_t total = 0;
#pragma omp parallel for schedule(static) num_threads(threads) reduction(+ : total)
    for (size_t i = 0; i < n; ++i) total += buf[i];
    sink += total;
  }
  benchmark::DoNotOptimize(sink);
  st.SetBytesProcessed(static_cast<int64_t>(st.iterations()) * static_cast<int64_t>(n * sizeof(uint64_t)));
}

struct Shape {
  GGMLType type;
  const char* what;
  int64_t rows, cols;
};

void run_matmul(benchmark::State& st, Shape s, int64_t n, int threads) {
  const auto& w = weights(s.type, s.rows, s.cols);
  const snapkv::WeightView W{s.type, s.rows, s.cols, w.data()};
  const auto x = make_x(n * s.cols);
  std::vector<float> y(static_cast<size_t>(n * s.rows));
  snapkv::ThreadContext tc(threads);
  for (auto _ : st) {
    snapkv::matmul(W, x.data(), n, y.data(), tc);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double it = static_cast<double>(st.iterations());
  if (n == 1) {
    st.counters["GB/s"] = benchmark::Counter(it * static_cast<double>(w.size()) / 1e9, benchmark::Counter::kIsRate);
  } else {
    st.counters["tok/s"] = benchmark::Counter(it * static_cast<double>(n), benchmark::Counter::kIsRate);
  }
  st.counters["GFLOP/s"] =
      benchmark::Counter(it * 2.0 * static_cast<double>(s.rows * s.cols * n) / 1e9, benchmark::Counter::kIsRate);
  st.counters["MB"] = static_cast<double>(w.size()) / 1e6;
}

/// With --benchmark_repetitions=N, the "_min" aggregate is the least disturbed run (on a
/// shared machine the mean mostly measures the neighbours). Rates then read "max".
double min_of(const std::vector<double>& v) { return v.empty() ? 0.0 : *std::min_element(v.begin(), v.end()); }

std::string tname(GGMLType t) { return snapkv::ggml_type_name(static_cast<uint32_t>(t)); }

void register_all() {
  benchmark::RegisterBenchmark("MemRead", BM_MemRead)
      ->Arg(1)
      ->Arg(2)
      ->ArgName("threads")
      ->UseRealTime()
      ->ComputeStatistics("min", min_of);

  // Gemma 3 270M Q4_K_M: per-layer weights (L2/L3-resident when repeated) and the tied output.
  const Shape gemma[] = {
      {GGMLType::Q5_0, "gemma.attn_q", 1024, 640},   {GGMLType::Q5_0, "gemma.attn_k", 256, 640},
      {GGMLType::Q8_0, "gemma.attn_v", 256, 640},    {GGMLType::Q4_K, "gemma.attn_output", 640, 1024},
      {GGMLType::Q5_0, "gemma.ffn_up", 2048, 640},   {GGMLType::Q6_K, "gemma.ffn_down", 640, 2048},
      {GGMLType::Q8_0, "gemma.output", 262144, 640},
  };
  // Synthetic SmolLM2-shaped model: all Q8_0.
  const Shape synth[] = {
      {GGMLType::Q8_0, "synth.ffn_up", 1536, 576},
      {GGMLType::Q8_0, "synth.ffn_down", 576, 1536},
      {GGMLType::Q8_0, "synth.output", 49152, 576},
  };
  // Larger than L3 (32 MiB here): memory-bound decode per type.
  const Shape stream[] = {
      {GGMLType::Q8_0, "stream", 65536, 2048}, {GGMLType::Q5_0, "stream", 65536, 2048},
      {GGMLType::Q4_K, "stream", 65536, 2048}, {GGMLType::Q6_K, "stream", 65536, 2048},
      {GGMLType::Q4_0, "stream", 65536, 2048}, {GGMLType::Q4_1, "stream", 65536, 2048},
      {GGMLType::Q5_1, "stream", 65536, 2048}, {GGMLType::Q5_K, "stream", 65536, 2048},
      {GGMLType::F16, "stream", 32768, 2048},  {GGMLType::BF16, "stream", 32768, 2048},
      {GGMLType::F32, "stream", 16384, 2048},
  };
  auto reg = [](const Shape& s, int64_t n, int threads) {
    const std::string name =
        n == 1 ? fmt::format("Decode/{}/{}/{}x{}/threads:{}", tname(s.type), s.what, s.rows, s.cols, threads)
               : fmt::format("Prefill/{}/{}/{}x{}/n:{}/threads:{}", tname(s.type), s.what, s.rows, s.cols, n, threads);
    benchmark::RegisterBenchmark(name.c_str(), [s, n, threads](benchmark::State& st) { run_matmul(st, s, n, threads); })
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond)
        ->ComputeStatistics("min", min_of);
  };
  for (const int th : {1, 2}) {
    for (const auto& s : gemma) reg(s, 1, th);
    for (const auto& s : synth) reg(s, 1, th);
    for (const auto& s : stream) reg(s, 1, th);
  }
  // Prefill: the per-layer shapes, plus every type on one square-ish shape.
  const Shape per_type[] = {
      {GGMLType::F32, "ffn", 2048, 1024},  {GGMLType::F16, "ffn", 2048, 1024},  {GGMLType::BF16, "ffn", 2048, 1024},
      {GGMLType::Q8_0, "ffn", 2048, 1024}, {GGMLType::Q4_0, "ffn", 2048, 1024}, {GGMLType::Q4_1, "ffn", 2048, 1024},
      {GGMLType::Q5_0, "ffn", 2048, 1024}, {GGMLType::Q5_1, "ffn", 2048, 1024}, {GGMLType::Q4_K, "ffn", 2048, 1024},
      {GGMLType::Q5_K, "ffn", 2048, 1024}, {GGMLType::Q6_K, "ffn", 2048, 1024},
  };
  for (const int th : {1, 2}) {
    for (const int64_t n : {64, 512}) {
      for (size_t i = 0; i + 1 < std::size(gemma); ++i) reg(gemma[i], n, th);
      reg(synth[0], n, th);
      reg(synth[1], n, th);
    }
    for (const auto& s : per_type) reg(s, 64, th);
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
