// C API misuse beyond NULLs and wrong-kind handles: values a C caller can pass that C++ callers
// rarely do (NaN logits, hostile strings, bytes that are not UTF-8, huge counts), each refused
// with a status and a one-line message while the objects involved stay usable.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "capi/capi_test_util.h"

namespace snapkv::capitest {
namespace {

/// The last error is fit for one log line: no control bytes, bounded length.
void expect_one_line(const std::string& what) {
  const std::string m = snapkv_last_error();
  for (const char ch : m) {
    const auto u = static_cast<unsigned char>(ch);
    EXPECT_TRUE(u >= 0x20 && u != 0x7f) << what << ": control byte " << int{u} << " in: " << m;
  }
  EXPECT_LT(m.size(), 600u) << what << ": " << m.substr(0, 200);
}

// Press specs from the caller are echoed into snapkv_last_error(): escaped and cut, so the
// message stays one printable line however hostile the spec.
TEST(CApiMisuse, HostilePressSpecsGiveOneLineErrors) {
  EnginePtr e = load_stories();
  ASSERT_TRUE(e);
  SequencePtr seq = new_sequence(e.get());
  const std::vector<int32_t> ids = tokenize(e.get(), "Once upon a time");
  const std::string huge = "snapkv:budget=" + std::string(1 << 20, '7');
  const std::string many = std::string(1 << 16, ',');
  for (const char* spec : {"snap\nkv", "snapkv:window=\x1b[2J", "snapkv:window=3\r\nX-Injected: 1", "\xff\xfe:a=b",
                           "nosuch\x7f", huge.c_str(), many.c_str()}) {
    expect_error(snapkv_prefill(seq.get(), ids.data(), ids.size(), spec, nullptr), SNAPKV_ERR_INVALID_ARGUMENT,
                 "snapkv_prefill");
    expect_one_line(std::string(spec).substr(0, 20));
    snapkv_generate_params p = greedy(2);
    p.press = spec;
    expect_error(snapkv_generate(seq.get(), ids.data(), ids.size(), &p, nullptr, nullptr, nullptr),
                 SNAPKV_ERR_INVALID_ARGUMENT, "snapkv_generate");
    expect_one_line(std::string(spec).substr(0, 20));
  }
  EXPECT_EQ(snapkv_sequence_n_past(seq.get()), 0);
}

TEST(CApiMisuse, SamplerRefusesNonFiniteLogits) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (const float temp : {0.0f, 0.7f, inf}) {
    snapkv_sampler* smp = nullptr;
    ASSERT_EQ(snapkv_sampler_new(temp, 0, 1.0f, 3, &smp), SNAPKV_OK) << snapkv_last_error();
    SamplerPtr owner(smp);
    int32_t t = -5;
    const float with_nan[3] = {1.0f, nan, 0.5f};
    expect_error(snapkv_sampler_sample(smp, with_nan, 3, &t), SNAPKV_ERR_INVALID_ARGUMENT, "snapkv_sampler_sample");
    const float masked[3] = {-inf, -inf, -inf};
    expect_error(snapkv_sampler_sample(smp, masked, 3, &t), SNAPKV_ERR_INVALID_ARGUMENT, "snapkv_sampler_sample");
    EXPECT_EQ(t, -5);
    const float some[4] = {-inf, 0.25f, -inf, 0.5f};
    for (int i = 0; i < 100; ++i) {
      ASSERT_EQ(snapkv_sampler_sample(smp, some, 4, &t), SNAPKV_OK) << snapkv_last_error();
      EXPECT_TRUE(t == 1 || t == 3) << "temp " << temp << ": drew " << t;
    }
  }
}

// Stop strings are matched against valid UTF-8 text: one that is not valid UTF-8 could cut a
// character in two, so it is refused before any work; empty ones are ignored.
TEST(CApiMisuse, StopStringsMustBeUtf8) {
  EnginePtr e = load_stories();
  ASSERT_TRUE(e);
  const std::vector<int32_t> ids = tokenize(e.get(), "Once upon a time");
  SequencePtr seq = new_sequence(e.get());
  snapkv_generate_params p = greedy(8);
  const char* bad[2] = {"Lily", "\xa9"};
  p.stop = bad;
  p.n_stop = 2;
  expect_error(snapkv_generate(seq.get(), ids.data(), ids.size(), &p, nullptr, nullptr, nullptr),
               SNAPKV_ERR_INVALID_ARGUMENT, "snapkv_generate", "stop string 1 is not valid UTF-8");
  EXPECT_EQ(snapkv_sequence_n_past(seq.get()), 0);
  const char* empty[1] = {""};
  p.stop = empty;
  p.n_stop = 1;
  Streamed out;
  snapkv_generate_result r;
  ASSERT_EQ(snapkv_generate(seq.get(), ids.data(), ids.size(), &p, record, &out, &r), SNAPKV_OK) << snapkv_last_error();
  EXPECT_EQ(r.stop_reason, SNAPKV_STOP_N_PREDICT);
  EXPECT_EQ(r.n_tokens, 8);
}

// A bad id in the question is found before the prompt is prefilled: the sequence stays empty
// and the same call with a good question then works.
TEST(CApiMisuse, GenerateWithABadQuestionIdChangesNothing) {
  EnginePtr e = load_stories();
  ASSERT_TRUE(e);
  const std::vector<int32_t> ids = tokenize(e.get(), "Once upon a time");
  SequencePtr seq = new_sequence(e.get());
  snapkv_generate_params p = greedy(3);
  const int32_t bad_q[2] = {5, 100000};
  p.question = bad_q;
  p.n_question = 2;
  expect_error(snapkv_generate(seq.get(), ids.data(), ids.size(), &p, nullptr, nullptr, nullptr),
               SNAPKV_ERR_INVALID_ARGUMENT, "snapkv_generate", "100000 at question index 1");
  EXPECT_EQ(snapkv_sequence_n_past(seq.get()), 0);
  const int32_t good_q[2] = {5, 6};
  p.question = good_q;
  snapkv_generate_result r;
  ASSERT_EQ(snapkv_generate(seq.get(), ids.data(), ids.size(), &p, nullptr, nullptr, &r), SNAPKV_OK)
      << snapkv_last_error();
  EXPECT_EQ(r.n_tokens, 3);
}

/// Prefill, batched decode of two sequences, fork, decode of the fork and stats: the tokens
/// picked greedily from the copied logits, and the final positions.
std::vector<int64_t> decode_workload(snapkv_sequence* a, snapkv_sequence* b, uint64_t seed) {
  std::vector<int64_t> out;
  std::mt19937_64 rng(seed);
  std::vector<int32_t> p(40 + seed % 7);
  for (auto& x : p) x = static_cast<int32_t>(3 + rng() % 500);
  if (snapkv_prefill(a, p.data(), p.size(), "snapkv:budget=24,window=8", nullptr) != SNAPKV_OK) return {-1};
  if (snapkv_prefill(b, p.data(), p.size() / 2, nullptr, nullptr) != SNAPKV_OK) return {-2};
  std::vector<float> logits(3 * 512);
  int32_t toks[3] = {5, 6, 7};
  for (int s = 0; s < 10; ++s) {
    snapkv_sequence* rows[3] = {a, b, b};
    if (snapkv_decode_batch(rows, toks, 3, logits.data(), logits.size()) != SNAPKV_OK) return {-3};
    for (int r = 0; r < 3; ++r) {
      const float* l = logits.data() + r * 512;
      toks[r] = static_cast<int32_t>(std::max_element(l, l + 512) - l);
      out.push_back(toks[r]);
    }
  }
  snapkv_sequence* f = nullptr;
  if (snapkv_sequence_fork(a, &f) != SNAPKV_OK) return {-4};
  const float* l = nullptr;
  for (int s = 0; s < 5; ++s) {
    if (snapkv_decode(f, toks[0], &l) != SNAPKV_OK) return {-5};
    toks[0] = static_cast<int32_t>(std::max_element(l, l + 512) - l);
    out.push_back(toks[0]);
  }
  snapkv_stats st;
  if (snapkv_sequence_stats(f, &st) != SNAPKV_OK) return {-6};
  out.push_back(st.n_past);
  out.push_back(static_cast<int64_t>(st.kv_cache_bytes));
  snapkv_sequence_free(f);
  out.push_back(snapkv_sequence_n_past(a));
  out.push_back(snapkv_sequence_n_past(b));
  return out;
}

// Threads decoding batches of their own sequences of one engine at once (the pool lends each
// call its own workspace), while the engine handle is freed under them: as run one by one.
TEST(CApiMisuse, ConcurrentBatchedDecodeAndForksWhileTheEngineHandleIsFreed) {
  EnginePtr e = load_stories(1);
  ASSERT_TRUE(e);
  const int n = 4;
  std::vector<std::vector<int64_t>> serial, got(n);
  std::vector<SequencePtr> seqs;
  for (int i = 0; i < 2 * n; ++i) seqs.push_back(new_sequence(e.get()));
  for (int i = 0; i < n; ++i) serial.push_back(decode_workload(seqs[2 * i].get(), seqs[2 * i + 1].get(), i));
  ASSERT_EQ(serial[0].size(), 39u) << serial[0][0];
  std::vector<SequencePtr> fresh;
  for (int i = 0; i < 2 * n; ++i) fresh.push_back(new_sequence(e.get()));
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&, i] { got[i] = decode_workload(fresh[2 * i].get(), fresh[2 * i + 1].get(), i); });
  e.reset();  // snapkv_engine_free while the threads run: the sequences keep the model
  for (auto& t : threads) t.join();
  for (int i = 0; i < n; ++i) EXPECT_EQ(got[i], serial[i]) << "thread " << i;
}

}  // namespace
}  // namespace snapkv::capitest
