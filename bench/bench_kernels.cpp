// snapkv micro-benchmarks of the quant kernels (Google Benchmark).
//
//   MemRead/threads:T           streaming read of a 1 GiB buffer: the machine's memory
//                               bandwidth, the ceiling of decode (bytes_per_second)
//   Decode/<type>/<what>/<rows>x<cols>/threads:T
//                               matmul with n_tokens = 1; GB/s counts weight bytes
//   Decode/Q8_0/synth.<matrix>/<rows>x<cols>/threads:T/cold
//                               the synthetic model's per-layer decode matrices from memory: each
//                               iteration multiplies another copy of the weights (~512 MB of them)
//   DecodeRowLane/Q8_0/<what>/<rows>x<cols>/threads:T
//                               the same product with the row-lane prototype (quant/kern_rowlane.h,
//                               AVX-512 VNNI builds): weights repacked once before timing; each
//                               iteration quantizes x and runs the groups split evenly over T threads;
//                               .../n:4/... four tokens at once (compare Prefill/Q8_0/.../n:4)
//   Prefill/<type>/<what>/<rows>x<cols>/n:N/threads:T
//                               matmul with n_tokens = N; GFLOP/s = 2*rows*cols*N / time
//   DecodeAttn/<model>/<old|new>/keys:K/rows:R/threads:T
//                               decode attention of R sequences (one query token each) over F16
//                               caches of K keys; GB/s counts the K and V bytes read. "new" is
//                               snapkv::attention_decode (split-K, all rows in one call); "old" is
//                               a copy of the kernel it replaced (full score row per head, exact
//                               softmax, F16 probabilities; one call per row), kept here only as
//                               the peer. Each iteration reads another set of caches, ~640 MB in
//                               all (more than the L3), as a decode step reads every layer's cache;
//                               ".../warm" reads one 1 MB set again and again (cache-resident: the
//                               compute ceiling).
//   FmaPeak/threads:T           independent f32 FMAs (AVX-512 when compiled for it, else AVX2):
//                               the machine's f32 compute ceiling (GFLOP/s, 2 FLOPs per lane)
//   Bf16DotPeak/threads:T       independent AVX512-BF16 dot products (vdpbf16ps, 64 FLOPs each):
//                               the ceiling of --prefill-attn bf16
//   AmxBf16Peak/threads:T       independent AMX-BF16 tile products (tdpbf16ps, 16 x 16 x 32 MACs
//                               = 16384 FLOPs each), where the CPU and Linux allow AMX
//   Int8DotPeak/threads:T       independent int8 dot steps of --prefill-attn int8 (vpsignb, then
//                               vpmaddubsw, vpmaddwd, vpaddd on AVX2 or vpdpbusd with VNNI: 32
//                               multiply-adds = 64 ops each)
//   Int8DotPeak512/threads:T    independent 512-bit vpdpbusd (AVX512-VNNI; 128 ops each, no sign
//                               step): what 512-bit int8 tiles could reach
//   PrefillAttn/<model>[/bf16|/bf16_avx512|/int8]/keys:K/threads:T
//                               snapkv::attention() of the last 512 queries of a K-token prompt
//                               over its F16 cache (the last chunk of a K-token prefill), exact or
//                               with PrefillAttention::BF16 (on AMX tiles where usable; bf16_avx512:
//                               on AVX512-BF16 vectors, AMX turned off) or PrefillAttention::Int8;
//                               GFLOP/s = 4 x head_dim x n_head x (visible keys summed over queries)
// Shapes: Gemma 3 270M Q4_K_M (n_embd 640, n_ff 2048, q 1024 rows, k/v 256, vocab 262144 Q8_0)
// with its tensor types, the synthetic SmolLM2-shaped Q8_0 model (576 / 1536 / 49152), and
// large "stream" matrices (> L3) per type, and Q5_0 at Gemma's row length 640, to measure
// memory-bound decode.
// Counters are computed from wall time; on a shared machine compare the cpu_time column
// (single-thread runs) or use repetitions and the "_min" aggregate.
// Run: build/bench_kernels [--benchmark_filter=Decode] [--benchmark_min_time=0.1]
//        [--benchmark_repetitions=5 --benchmark_report_aggregates_only=true]  (see "_min")
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "attention/amx.h"
#include "attention/attention.h"
#include "attention/decode.h"
#include "attention/positions.h"
#include "attention/prefill.h"
#include "attention/simd.h"
#include "core/fp16.h"
#include "core/ggml_type.h"
#include "kv/kv_cache.h"
#include "peaks.h"
#include "quant/act_quant.h"
#include "quant/kern_rowlane.h"
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

/// Decode (n = 1) from memory: each iteration multiplies another copy of the weights, out of
/// copies filling ~512 MB (past the L3), as a decode step reads each layer's small matrices cold
/// after the attention has streamed the KV cache through the caches.
void run_matmul_cold(benchmark::State& st, Shape s, int threads) {
  const auto& w = weights(s.type, s.rows, s.cols);
  const size_t copies = std::max<size_t>(2, (size_t{512} << 20) / w.size());
  std::vector<uint8_t> pool(copies * w.size());
  for (size_t c = 0; c < copies; ++c) std::memcpy(pool.data() + c * w.size(), w.data(), w.size());
  const auto x = make_x(s.cols);
  std::vector<float> y(static_cast<size_t>(s.rows));
  snapkv::ThreadContext tc(threads);
  size_t c = 0;
  for (auto _ : st) {
    const snapkv::WeightView W{s.type, s.rows, s.cols, pool.data() + c * w.size()};
    snapkv::matmul(W, x.data(), 1, y.data(), tc);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
    c = c + 1 == copies ? 0 : c + 1;
  }
  const double it = static_cast<double>(st.iterations());
  st.counters["GB/s"] = benchmark::Counter(it * static_cast<double>(w.size()) / 1e9, benchmark::Counter::kIsRate);
  st.counters["MB"] = static_cast<double>(w.size()) / 1e6;
}

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

#if defined(SNAPKV_VNNI)
void run_rowlane(benchmark::State& st, Shape s, int threads, int n) {
  namespace q = snapkv::quant;
  const auto& w = weights(s.type, s.rows, s.cols);
  const snapkv::WeightView W{s.type, s.rows, s.cols, w.data()};
  std::vector<uint8_t> packed(q::rowlane_q8_0_bytes(s.rows, s.cols));
  q::pack_rowlane_q8_0(w.data(), W.row_bytes(), s.rows, s.cols, packed.data());
  const auto x = make_x(n * s.cols);
  std::vector<float> y(static_cast<size_t>(n * s.rows));
  snapkv::ThreadContext tc(threads);
  for (auto _ : st) {
    q::matmul_rowlane_q8_0(packed.data(), s.rows, s.cols, x.data(), n, y.data(), tc);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double it = static_cast<double>(st.iterations());
  st.counters["GB/s"] = benchmark::Counter(it * static_cast<double>(packed.size()) / 1e9, benchmark::Counter::kIsRate);
  st.counters["MB"] = static_cast<double>(packed.size()) / 1e6;
}
#endif

/// With --benchmark_repetitions=N, the "_min" aggregate is the least disturbed run (on a
/// shared machine the mean mostly measures the neighbours). Rates then read "max".
double min_of(const std::vector<double>& v) { return v.empty() ? 0.0 : *std::min_element(v.begin(), v.end()); }

// ---- Decode attention ----

/// The decode kernel snapkv used before attention_decode (src/attention/attention.cpp at f3b1e87),
/// kept only as this benchmark's peer. One query (one row): the full score row of every head in a
/// [n_head][max_keys] buffer, maxima per block of 128 keys, exponentials and double sums against
/// the head maximum, normalized probabilities rounded to F16 (F16 cache) times V per block, blocks
/// reduced in order; three parallel phases (two barriers) on omp_get_max_threads() threads.
class OldDecode {
 public:
  static constexpr int64_t kBlock = 128;
  OldDecode(const snapkv::AttentionParams& p, int64_t max_keys)
      : max_keys_(max_keys), nb_max_((max_keys + kBlock - 1) / kBlock + 1) {
    const auto nh = static_cast<size_t>(p.n_head), hd = static_cast<size_t>(p.head_dim);
    const auto nb = static_cast<size_t>(nb_max_);
    scores_.resize(nh * static_cast<size_t>(max_keys));
    partial_.resize(nh * nb * hd);
    bmax_.resize(nh * nb);
    bsum_.resize(nh * nb);
    off_.resize(static_cast<size_t>(p.n_head_kv) + 1);
    jb_.resize(static_cast<size_t>(p.n_head_kv));
    je_.resize(static_cast<size_t>(p.n_head_kv));
    q16_.resize(nh * hd);
  }

  void run(const snapkv::AttentionParams& p, const float* q, int64_t qp, const snapkv::KVLayerCache& cache,
           float* out) {
    namespace attn = snapkv::attn;
    const int G = p.n_head / p.n_head_kv, hd = p.head_dim;
    const bool f16 = cache.heads[0].k_type() == snapkv::KVType::F16;
    const float* qa = q;
    if (f16) {
      attn::round_f16_row(q, q16_.data(), static_cast<int64_t>(q16_.size()));
      qa = q16_.data();
    }
    int64_t *off = off_.data(), *JB = jb_.data(), *JE = je_.data();
    off[0] = 0;
    int64_t total_keys = 0;
    for (int g = 0; g < p.n_head_kv; ++g) {
      const snapkv::KVHeadCache& hc = cache.heads[static_cast<size_t>(g)];
      JE[g] = attn::upper_index(hc.pos_data(), hc.size(), qp);
      JB[g] = p.window > 0 ? attn::lower_index(hc.pos_data(), JE[g], qp - p.window + 1) : 0;
      total_keys += JE[g] - JB[g];
      off[g + 1] = off[g] + (JE[g] - JB[g] + kBlock - 1) / kBlock;
    }
    const int64_t n_tasks = off[p.n_head_kv], nb_max = nb_max_, max_keys = max_keys_;
    float *scores = scores_.data(), *partial = partial_.data(), *bmax = bmax_.data();
    double* bsum = bsum_.data();
    auto task_range = [&](int64_t task, int& g, int64_t& b, int64_t& j0, int64_t& j1) {
      g = static_cast<int>(std::upper_bound(off, off + p.n_head_kv + 1, task) - off) - 1;
      b = task - off[g];
      j0 = JB[g] + b * kBlock;
      j1 = std::min(JE[g], j0 + kBlock);
    };
    const bool par = total_keys * G * hd >= (int64_t{1} << 18);
    auto head_max = [&](int h, int g) {
      float mx = attn::kNegInf;
      for (int64_t b = 0; b < off[g + 1] - off[g]; ++b) mx = std::max(mx, bmax[static_cast<size_t>(h) * nb_max + b]);
      return mx;
    };
    auto head_inv = [&](int h, int g) {
      double sum = 0.0;
      for (int64_t b = 0; b < off[g + 1] - off[g]; ++b) sum += bsum[static_cast<size_t>(h) * nb_max + b];
      return sum > 0.0 ? static_cast<float>(1.0 / sum) : 0.0f;
    };
#pragma omp parallel if (par)
    {
#pragma omp for schedule(static)
      for (int64_t task = 0; task < n_tasks; ++task) {
        int g;
        int64_t b, j0, j1;
        task_range(task, g, b, j0, j1);
        const snapkv::KVHeadCache& hc = cache.heads[static_cast<size_t>(g)];
        for (int hh = 0; hh < G; ++hh) {
          const int h = g * G + hh;
          const float* qv = qa + static_cast<size_t>(h) * hd;
          float* sr = scores + static_cast<size_t>(h) * max_keys;
          float mx = attn::kNegInf;
          for (int64_t j = j0; j < j1; ++j) {
            float d;
            if (f16) {
              const uint16_t* kr = static_cast<const uint16_t*>(hc.k_data()) + j * hd;
              d = hd < attn::kExactDotBelow ? attn::dot_f32_f16_acc64(qv, kr, hd) : attn::dot_f32_f16(qv, kr, hd);
            } else {
              d = attn::dot_f32(qv, static_cast<const float*>(hc.k_data()) + j * hd, hd);
            }
            sr[j - JB[g]] = p.scale * d;
            mx = std::max(mx, sr[j - JB[g]]);
          }
          bmax[static_cast<size_t>(h) * nb_max + b] = mx;
        }
      }
#pragma omp for schedule(static)
      for (int64_t task = 0; task < n_tasks; ++task) {
        int g;
        int64_t b, j0, j1;
        task_range(task, g, b, j0, j1);
        for (int hh = 0; hh < G; ++hh) {
          const int h = g * G + hh;
          const float mx = head_max(h, g);
          float* sr = scores + static_cast<size_t>(h) * max_keys;
          double sum = 0.0;
          for (int64_t j = j0; j < j1; ++j) {
            const float e = std::exp(sr[j - JB[g]] - mx);
            sr[j - JB[g]] = e;
            sum += static_cast<double>(e);
          }
          bsum[static_cast<size_t>(h) * nb_max + b] = sum;
        }
      }
#pragma omp for schedule(static)
      for (int64_t task = 0; task < n_tasks; ++task) {
        int g;
        int64_t b, j0, j1;
        task_range(task, g, b, j0, j1);
        const snapkv::KVHeadCache& hc = cache.heads[static_cast<size_t>(g)];
        for (int hh = 0; hh < G; ++hh) {
          const int h = g * G + hh;
          const float inv = head_inv(h, g);
          const float* sr = scores + static_cast<size_t>(h) * max_keys;
          float* acc = partial + (static_cast<size_t>(h) * nb_max + static_cast<size_t>(b)) * hd;
          std::fill(acc, acc + hd, 0.0f);
          for (int64_t j = j0; j < j1; ++j) {
            float pr = sr[j - JB[g]] * inv;
            if (f16) {
              pr = attn::round_f16(pr);
              if (pr != 0.0f) attn::axpy_f16(acc, pr, static_cast<const uint16_t*>(hc.v_data()) + j * hd, hd);
            } else if (pr != 0.0f) {
              attn::axpy_f32(acc, pr, static_cast<const float*>(hc.v_data()) + j * hd, hd);
            }
          }
        }
      }
    }
    for (int h = 0; h < p.n_head; ++h) {
      const int g = h / G;
      float* o = out + static_cast<size_t>(h) * hd;
      std::fill(o, o + hd, 0.0f);
      for (int64_t b = 0; b < off[g + 1] - off[g]; ++b)
        attn::axpy_f32(o, 1.0f, partial + (static_cast<size_t>(h) * nb_max + static_cast<size_t>(b)) * hd, hd);
    }
  }

 private:
  int64_t max_keys_, nb_max_;
  std::vector<float> scores_, partial_, bmax_, q16_;
  std::vector<double> bsum_;
  std::vector<int64_t> off_, jb_, je_;
};

struct AttnShape {
  const char* model;
  int n_head, n_head_kv, head_dim;
  int window = 0;  ///< sliding window in tokens (0: none)
  snapkv::AttentionParams params() const {
    return {n_head, n_head_kv, head_dim, 1.0f / std::sqrt(static_cast<float>(head_dim)), window};
  }
};

/// `copies` sets of `rows` sequences, each an F16 (or Q8_0 / Q4_0) cache of `keys` entries (positions
/// 0..keys-1) per KV head, and their queries at position keys - 1 (every key visible).
struct DecodeData {
  int64_t keys = 0, rows = 0, copies = 0;
  std::vector<std::unique_ptr<snapkv::KVLayerCache>> caches;  // [copies][rows]
  std::vector<float> q, out;                                  // [rows][n_head * head_dim]
  std::vector<snapkv::DecodeQuery> queries;                   // [copies][rows]
  size_t bytes_per_set = 0;                                   // K + V bytes one set reads
};

constexpr double kDecodeFootprint = 640e6;  // bytes of caches cycled through (> L3)

/// Built on first use and kept until another (shape, keys, rows, warm) is asked for. warm: one
/// set only, read again by every iteration (cache-resident when small: the compute ceiling).
/// Keys stored as `type`, values as `vtype`.
const DecodeData& decode_data(const AttnShape& s, int64_t keys, int64_t rows, bool warm, snapkv::KVType type,
                              snapkv::KVType vtype) {
  static std::string built;
  static std::unique_ptr<DecodeData> d;
  const std::string id = fmt::format("{}/{}/{}/{}/{}/{}", s.model, keys, rows, warm, snapkv::kv_type_name(type),
                                     snapkv::kv_type_name(vtype));
  if (d && built == id) return *d;
  d.reset();
  d = std::make_unique<DecodeData>();
  d->keys = keys;
  d->rows = rows;
  d->bytes_per_set = static_cast<size_t>(rows * s.n_head_kv * keys) * snapkv::kv_entry_bytes(type, vtype, s.head_dim);
  d->copies =
      warm ? 1 : std::max<int64_t>(1, static_cast<int64_t>(kDecodeFootprint / static_cast<double>(d->bytes_per_set)));
  const size_t qn = static_cast<size_t>(s.n_head) * static_cast<size_t>(s.head_dim);
  d->q = make_x(static_cast<int64_t>(rows * static_cast<int64_t>(qn)));
  d->out.assign(d->q.size(), 0.0f);
  std::vector<int32_t> pos(static_cast<size_t>(keys));
  for (int64_t j = 0; j < keys; ++j) pos[static_cast<size_t>(j)] = static_cast<int32_t>(j);
  std::vector<float> k(static_cast<size_t>(keys) * static_cast<size_t>(s.head_dim)), v(k.size());
  uint64_t x = 0x9E3779B97F4A7C15ull;
  auto uniform = [&x] {  // xorshift64, [-1, 1)
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return static_cast<float>(static_cast<int64_t>(x >> 40) - (int64_t{1} << 23)) *
           (1.0f / static_cast<float>(1 << 23));
  };
  for (int64_t c = 0; c < d->copies * rows; ++c) {
    auto cache = std::make_unique<snapkv::KVLayerCache>();
    for (int g = 0; g < s.n_head_kv; ++g) {
      for (auto& e : k) e = 2.0f * uniform();
      for (auto& e : v) e = uniform();
      snapkv::KVHeadCache h(type, vtype, s.head_dim);
      h.append(keys, pos.data(), k.data(), s.head_dim, v.data(), s.head_dim);
      cache->heads.push_back(std::move(h));
    }
    const size_t r = static_cast<size_t>(c % rows);
    d->queries.push_back({d->q.data() + r * qn, static_cast<int32_t>(keys - 1), cache.get(), d->out.data() + r * qn});
    d->caches.push_back(std::move(cache));
  }
  built = id;
  return *d;
}

void run_decode_attn(benchmark::State& st, AttnShape s, int64_t keys, int64_t rows, int threads, bool old, bool warm,
                     snapkv::KVType type, snapkv::KVType vtype) {
  const DecodeData& d = decode_data(s, keys, rows, warm, type, vtype);
  const snapkv::AttentionParams p = s.params();
  snapkv::DecodeWorkspace ws(p, rows);
  OldDecode peer(p, keys);
  omp_set_num_threads(threads);  // the old kernel's thread count (the new one takes it as an argument)
  int64_t set = 0;
  for (auto _ : st) {
    const snapkv::DecodeQuery* qs = d.queries.data() + set * rows;
    if (old) {
      for (int64_t r = 0; r < rows; ++r) peer.run(p, qs[r].q, qs[r].pos, *qs[r].cache, qs[r].out);
    } else {
      snapkv::attention_decode(p, {qs, static_cast<size_t>(rows)}, ws, threads);
    }
    benchmark::DoNotOptimize(d.out.data());
    benchmark::ClobberMemory();
    set = (set + 1) % d.copies;
  }
  const double it = static_cast<double>(st.iterations());
  st.counters["GB/s"] =
      benchmark::Counter(it * static_cast<double>(d.bytes_per_set) / 1e9, benchmark::Counter::kIsRate);
  st.counters["MB"] = static_cast<double>(d.bytes_per_set) / 1e6;
}

/// The last 512 queries of a `keys`-token prompt over its F16 cache (positions 0..keys-1 per KV
/// head): the work of a prefill's last chunk. Counts 4 x head_dim FLOPs (Q K^T and P V) per
/// (query head, visible key).
void run_prefill_attn(benchmark::State& st, AttnShape s, int64_t keys, int threads,
                      snapkv::PrefillAttention mode = snapkv::PrefillAttention::Exact) {
  constexpr int64_t kQueries = 512;
  const snapkv::AttentionParams p = s.params();
  snapkv::KVLayerCache cache;
  std::vector<int32_t> pos(static_cast<size_t>(keys));
  for (int64_t j = 0; j < keys; ++j) pos[static_cast<size_t>(j)] = static_cast<int32_t>(j);
  for (int g = 0; g < s.n_head_kv; ++g) {
    const std::vector<float> k = make_x(keys * s.head_dim), v = make_x(keys * s.head_dim);
    snapkv::KVHeadCache h(snapkv::KVType::F16, s.head_dim);
    h.append(keys, pos.data(), k.data(), s.head_dim, v.data(), s.head_dim);
    cache.heads.push_back(std::move(h));
  }
  const std::vector<float> q = make_x(kQueries * s.n_head * s.head_dim);
  std::vector<float> out(q.size());
  const std::vector<int32_t> qpos(pos.end() - kQueries, pos.end());
  snapkv::AttentionWorkspace ws(p, kQueries, mode);
  for (auto _ : st) {
    snapkv::attention(p, q.data(), qpos.data(), kQueries, cache, out.data(), ws, threads);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  double visible = 0;
  for (int32_t t : qpos) visible += static_cast<double>(p.window > 0 ? std::min(t + 1, p.window) : t + 1);
  const double flops = 4.0 * s.head_dim * s.n_head * visible;
  st.counters["GFLOP/s"] =
      benchmark::Counter(static_cast<double>(st.iterations()) * flops / 1e9, benchmark::Counter::kIsRate);
}

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
  // SmolLM2-135M-Instruct Q4_1: its FFN matrices (L2-resident when repeated).
  const Shape smol[] = {
      {GGMLType::Q4_1, "smol.ffn_up", 1536, 576},
      {GGMLType::Q4_1, "smol.ffn_down", 576, 1536},
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
  // Gemma 3's rows of 640 (Q5_0: its q, k, gate and up projections), from memory.
  const Shape stream_640[] = {{GGMLType::Q5_0, "stream", 196608, 640}};
  auto reg = [](const Shape& s, int64_t n, int threads) {
    const std::string name =
        n == 1 ? fmt::format("Decode/{}/{}/{}x{}/threads:{}", tname(s.type), s.what, s.rows, s.cols, threads)
               : fmt::format("Prefill/{}/{}/{}x{}/n:{}/threads:{}", tname(s.type), s.what, s.rows, s.cols, n, threads);
    benchmark::RegisterBenchmark(name.c_str(), [s, n, threads](benchmark::State& st) { run_matmul(st, s, n, threads); })
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond)
        ->ComputeStatistics("min", min_of);
  };
#if defined(SNAPKV_VNNI)
  // The row-lane prototype on the Q8_0 decode shapes (registered first: compare with Decode/Q8_0).
  for (const int th : {1, 2})
    for (const Shape& s : {gemma[2], gemma[6], synth[0], synth[1], synth[2], stream[0]})
      for (const int n : {1, 4}) {
        const std::string name =
            n == 1 ? fmt::format("DecodeRowLane/{}/{}/{}x{}/threads:{}", tname(s.type), s.what, s.rows, s.cols, th)
                   : fmt::format("DecodeRowLane/{}/{}/{}x{}/n:{}/threads:{}", tname(s.type), s.what, s.rows, s.cols, n,
                                 th);
        benchmark::RegisterBenchmark(name.c_str(), [s, th, n](benchmark::State& st) { run_rowlane(st, s, th, n); })
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond)
            ->ComputeStatistics("min", min_of);
      }
#endif
  // The synthetic model's decode matrices from memory (one call per layer each in a step).
  const Shape synth_cold[] = {
      {GGMLType::Q8_0, "synth.attn_qkv", 960, 576},
      {GGMLType::Q8_0, "synth.attn_output", 576, 576},
      {GGMLType::Q8_0, "synth.ffn_gate_up", 3072, 576},
      {GGMLType::Q8_0, "synth.ffn_down", 576, 1536},
  };
  for (const int th : {1, 2})
    for (const Shape& s : synth_cold)
      benchmark::RegisterBenchmark(
          fmt::format("Decode/{}/{}/{}x{}/threads:{}/cold", tname(s.type), s.what, s.rows, s.cols, th).c_str(),
          [s, th](benchmark::State& st) { run_matmul_cold(st, s, th); })
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond)
          ->ComputeStatistics("min", min_of);
  for (const int th : {1, 2}) {
    for (const auto& s : gemma) reg(s, 1, th);
    for (const auto& s : synth) reg(s, 1, th);
    for (const auto& s : smol) reg(s, 1, th);
    for (const auto& s : stream) reg(s, 1, th);
    for (const auto& s : stream_640) reg(s, 1, th);
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
    reg(gemma[6], 4, th);  // four decode rows (batched decode), beside DecodeRowLane/.../n:4
    reg(synth[0], 4, th);
    // Few tokens (a batched decode of 8-16 sequences) on Gemma 3's Q5_0 / K-quant matrices, a
    // Q8_0 and a Q4_1 one: token lanes against the decode tiles (SNAPKV_TOKEN_LANES=0), where they
    // cross (quant::lane_min_tokens).
    for (const int64_t n : {8, 12, 16}) {
      reg(gemma[0], n, th);
      reg(gemma[3], n, th);
      reg(gemma[5], n, th);
      reg(synth[0], n, th);
      reg(smol[0], n, th);
    }
  }

  // Decode attention: SmolLM2 (9 query heads, 3 KV heads, head_dim 64) and Gemma 3 270M (4 / 1 /
  // 256) shapes; the (shape, keys, rows) loop is outermost so each cache set is built once.
  // old / new: the previous and the split-K kernel over F16 caches; q8_0 / q4_0: the split-K kernel
  // over Q8_0 / Q4_0 caches (registered after the F16 ones: a set is rebuilt when the type changes);
  // q8_0_q4_0: Q8_0 keys with Q4_0 values.
  const AttnShape attn_shapes[] = {{"smollm2", 9, 3, 64}, {"gemma3", 4, 1, 256}};
  auto reg_attn = [](const AttnShape& s, int64_t keys, int64_t rows, int th, bool old, bool warm,
                     snapkv::KVType type = snapkv::KVType::F16, std::optional<snapkv::KVType> v = std::nullopt) {
    const snapkv::KVType vtype = v.value_or(type);
    std::string kernel = snapkv::kv_type_quantized(type) ? snapkv::kv_type_name(type) : old ? "old" : "new";
    if (vtype != type) kernel += std::string("_") + snapkv::kv_type_name(vtype);
    const std::string name = fmt::format("DecodeAttn/{}/{}/keys:{}/rows:{}/threads:{}{}", s.model, kernel, keys, rows,
                                         th, warm ? "/warm" : "");
    benchmark::RegisterBenchmark(
        name.c_str(), [=](benchmark::State& st) { run_decode_attn(st, s, keys, rows, th, old, warm, type, vtype); })
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond)
        ->ComputeStatistics("min", min_of);
  };
  for (const auto& s : attn_shapes) {
    for (const int64_t keys : {1024, 4096, 16384, 32768})
      for (const int64_t rows : {1, 16})
        for (const int th : {1, 2})
          for (const bool old : {true, false}) reg_attn(s, keys, rows, th, old, false);
    // Cache-resident (1 MB, read again each iteration: L3 on a 512 KiB-L2 core), and 256 keys
    // (256 KB or less: L2-resident), the kernels' compute ceiling; 512 keys from memory: a
    // Gemma 3 sliding-window layer.
    for (const bool old : {true, false}) reg_attn(s, 1024, 1, 1, old, true);
    reg_attn(s, 256, 1, 1, false, true);
    reg_attn(s, 512, 1, 2, false, false);
    for (const int64_t keys : {1024, 4096, 16384, 32768})
      for (const int64_t rows : {1, 16})
        for (const int th : {1, 2}) reg_attn(s, keys, rows, th, false, false, snapkv::KVType::Q8_0);
    reg_attn(s, 1024, 1, 1, false, true, snapkv::KVType::Q8_0);
    for (const int64_t keys : {1024, 4096, 16384, 32768})
      for (const int th : {1, 2}) reg_attn(s, keys, 1, th, false, false, snapkv::KVType::Q4_0);
    reg_attn(s, 1024, 1, 1, false, true, snapkv::KVType::Q4_0);
    for (const int64_t keys : {1024, 4096, 16384, 32768})
      for (const int th : {1, 2}) reg_attn(s, keys, 1, th, false, false, snapkv::KVType::Q8_0, snapkv::KVType::Q4_0);
    reg_attn(s, 1024, 1, 1, false, true, snapkv::KVType::Q8_0, snapkv::KVType::Q4_0);
  }

  // Compute ceilings, 1 and 2 threads.
  const std::pair<const char*, void (*)(benchmark::State&)> peaks[] = {
      {"FmaPeak", snapkv_bench::BM_FmaPeak},
      {"Bf16DotPeak", snapkv_bench::BM_Bf16DotPeak},
      {"AmxBf16Peak", snapkv_bench::BM_AmxBf16Peak},
      {"Int8DotPeak", snapkv_bench::BM_Int8DotPeak},
      {"Int8DotPeak512", snapkv_bench::BM_Int8DotPeak512}};
  for (const auto& [name, fn] : peaks)
    benchmark::RegisterBenchmark(name, fn)
        ->Arg(1)
        ->Arg(2)
        ->ArgName("threads")
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond)
        ->ComputeStatistics("min", min_of);
  auto reg_prefill = [](const AttnShape& s, int64_t keys, int th, snapkv::PrefillAttention mode, bool no_amx = false) {
    const bool bf16 = mode == snapkv::PrefillAttention::BF16;
    const char* variant = bf16                                     ? (no_amx ? "/bf16_avx512" : "/bf16")
                          : mode == snapkv::PrefillAttention::Int8 ? "/int8"
                                                                   : "";
    const std::string name = fmt::format("PrefillAttn/{}{}/keys:{}/threads:{}", s.model, variant, keys, th);
    benchmark::RegisterBenchmark(name.c_str(),
                                 [=](benchmark::State& st) {
                                   snapkv::attn::set_amx_disabled(no_amx);
                                   run_prefill_attn(st, s, keys, th, mode);
                                   snapkv::attn::set_amx_disabled(false);
                                 })
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond)
        ->ComputeStatistics("min", min_of);
  };
  // Gemma 3's sliding-window layers (window 512): 15 of its 18 layers.
  const AttnShape gemma3_local{"gemma3_local", 4, 1, 256, 512};
  for (const int th : {1, 2}) {
    reg_prefill(gemma3_local, 16384, th, snapkv::PrefillAttention::Exact);
    if (snapkv::prefill_attention_supported(snapkv::PrefillAttention::Int8))
      reg_prefill(gemma3_local, 16384, th, snapkv::PrefillAttention::Int8);
  }
  for (const auto& s : attn_shapes)
    for (const int64_t keys : {4096, 16384, 32768})
      for (const int th : {1, 2}) {
        reg_prefill(s, keys, th, snapkv::PrefillAttention::Exact);
        if (snapkv::prefill_attention_supported(snapkv::PrefillAttention::BF16))
          reg_prefill(s, keys, th, snapkv::PrefillAttention::BF16);
        if (snapkv::attn::amx_usable()) reg_prefill(s, keys, th, snapkv::PrefillAttention::BF16, true);
        if (snapkv::prefill_attention_supported(snapkv::PrefillAttention::Int8))
          reg_prefill(s, keys, th, snapkv::PrefillAttention::Int8);
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
