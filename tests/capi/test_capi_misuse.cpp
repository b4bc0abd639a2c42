// C API misuse beyond NULLs and wrong-kind handles: values a C caller can pass that C++ callers
// rarely do (NaN logits, hostile strings, bytes that are not UTF-8, huge counts), each refused
// with a status and a one-line message while the objects involved stay usable.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
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

}  // namespace
}  // namespace snapkv::capitest
