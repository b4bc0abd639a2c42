// make_press / press_capacity validation (snapkv::Error naming the flag and value), input checks
// of compress(), press_names() and RowsView::row.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "press_test_util.h"

namespace snapkv::test {
namespace {

/// Runs f, expects snapkv::Error whose message contains every part.
template <class F>
void expect_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no error thrown (expected one mentioning " << *parts.begin() << ")";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
  }
}

PressConfig cfg(const std::string& name, int64_t budget = 0, double ratio = -1) {
  PressConfig c;
  c.name = name;
  c.budget = budget;
  c.compression_ratio = ratio;
  return c;
}

TEST(PressConfig, NamesInHelpOrder) {
  EXPECT_EQ(press_names(), (std::vector<std::string>{"none", "snapkv", "pyramidkv", "adakv", "streamingllm", "h2o",
                                                     "tova", "knorm", "random"}));
  for (const auto& n : press_names()) {
    const auto p = make_press(cfg(n, n == "none" ? 0 : 64));
    EXPECT_EQ(p->name(), n);
    EXPECT_EQ(p->needs_all_queries(), n == "h2o");
  }
}

TEST(PressConfig, BadValuesGiveErrors) {
  expect_error([] { make_press(cfg("snapkvv", 64)); },
               {"--press", "'snapkvv'", "none, snapkv, pyramidkv, adakv, streamingllm, h2o, tova, knorm, random"});
  for (int k : {0, -1, 4}) {
    PressConfig c = cfg("snapkv", 64);
    c.kernel = k;
    expect_error([&] { make_press(c); }, {"--kernel", std::to_string(k)});
  }
  PressConfig w = cfg("snapkv", 64);
  w.window = 0;
  expect_error([&] { make_press(w); }, {"--window", "0"});
  expect_error([] { make_press(cfg("snapkv", 10)); }, {"--budget 10", "--window 32"});
  expect_error([] { make_press(cfg("snapkv", -5)); }, {"--budget -5"});
  expect_error([] { make_press(cfg("streamingllm", 35)); }, {"--budget 35", "--window 32", "--sinks 4"});
  PressConfig s = cfg("streamingllm", 64);
  s.sinks = -1;
  expect_error([&] { make_press(s); }, {"--sinks", "-1"});
  expect_error([] { make_press(cfg("snapkv", 0, 1.0)); }, {"--compression-ratio", "1"});
  expect_error([] { make_press(cfg("snapkv", 0, -0.5)); }, {"--compression-ratio", "-0.5"});
  expect_error([] { make_press(cfg("snapkv", 0, std::nan(""))); }, {"--compression-ratio", "nan"});
  expect_error([] { make_press(cfg("h2o")); }, {"--budget", "--compression-ratio", "neither"});
  expect_error([] { make_press(cfg("h2o", 64, 0.5)); }, {"--budget", "--compression-ratio", "both"});
  PressConfig pb = cfg("pyramidkv", 64);
  pb.pyramid_beta = 0.5;
  expect_error([&] { make_press(pb); }, {"pyramid_beta", "0.5"});
  PressConfig aa = cfg("adakv", 64);
  aa.adakv_alpha = 1.5;
  expect_error([&] { make_press(aa); }, {"adakv_alpha", "1.5"});
  // Valid settings.
  EXPECT_NO_THROW(make_press(cfg("none")));
  EXPECT_NO_THROW(make_press(cfg("none", 5)));  // none ignores the budget
  EXPECT_NO_THROW(make_press(cfg("snapkv", 32)));
  EXPECT_NO_THROW(make_press(cfg("streamingllm", 36)));
  EXPECT_NO_THROW(make_press(cfg("tova", 0, 0.0)));
  EXPECT_NO_THROW(make_press(cfg("tova", 0, 0.999)));
}

// Library callers are not capped by the CLI: huge window/sinks once overflowed `window + sinks`
// (int) into a negative minimum and passed the budget check.
TEST(PressConfig, HugeSpansAreRejectedNotOverflowed) {
  const int huge = std::numeric_limits<int>::max();
  PressConfig s = cfg("streamingllm", 64);
  s.window = huge;
  s.sinks = huge;
  expect_error([&] { make_press(s); }, {"--window", std::to_string(huge), "16777216"});
  s.window = 32;
  expect_error([&] { make_press(s); }, {"--sinks", std::to_string(huge), "16777216"});
  s.sinks = -3;
  expect_error([&] { make_press(s); }, {"--sinks", "-3"});
  s.sinks = (1 << 24) + 1;
  expect_error([&] { make_press(s); }, {"--sinks", "16777217"});
  for (int bad : {(1 << 24) + 1, huge, std::numeric_limits<int>::min()}) {
    PressConfig w = cfg("snapkv", 64);
    w.window = bad;
    expect_error([&] { make_press(w); }, {"--window", std::to_string(bad)});
    expect_error([&] { press_capacity(w, 100); }, {"--window", std::to_string(bad)});
    PressConfig k = cfg("snapkv", 64);
    k.kernel = bad | 1;  // odd, so only the range is wrong
    expect_error([&] { make_press(k); }, {"--kernel", std::to_string(bad | 1)});
  }
  // The caps themselves are valid; their sum is compared in 64 bits.
  PressConfig top = cfg("streamingllm", int64_t{2} << 24);
  top.window = 1 << 24;
  top.sinks = 1 << 24;
  top.kernel = (1 << 24) - 1;
  EXPECT_NO_THROW(make_press(top));
  top.budget = (int64_t{2} << 24) - 1;
  expect_error([&] { make_press(top); }, {"--budget 33554431", "--window 16777216", "--sinks 16777216"});
}

TEST(PressConfig, Capacity) {
  EXPECT_EQ(press_capacity(cfg("snapkv", 100), 1000), 100);
  EXPECT_EQ(press_capacity(cfg("snapkv", 100), 20), 100);        // L <= C: no compression
  EXPECT_EQ(press_capacity(cfg("snapkv", 0, 0.75), 1000), 250);  // 1000 - floor(750)
  // A ratio leaving fewer than the window (+ sinks) is an error, never a silent clamp.
  expect_error([] { press_capacity(cfg("snapkv", 0, 0.3), 7); }, {"--compression-ratio 0.3", "--window 32"});
  EXPECT_EQ(press_capacity(cfg("snapkv", 0, 0.3), 1001), 1001 - 300);
  EXPECT_EQ(press_capacity(cfg("snapkv", 0, 0.0), 500), 500);
  expect_error([] { press_capacity(cfg("streamingllm", 0, 0.99), 1000); }, {"--sinks 4"});
  EXPECT_EQ(press_capacity(cfg("streamingllm", 0, 0.96), 1000), 40);
  EXPECT_EQ(press_capacity(cfg("none"), 1234), 1234);
  expect_error([] { press_capacity(cfg("snapkv", 0, 2.0), 100); }, {"--compression-ratio"});
  expect_error([] { press_capacity(cfg("snapkv", 64), -1); }, {"n_tokens", "-1"});
}

TEST(PressConfig, CompressChecksItsInput) {
  const Layer l = Layer::random(100, 4, 2, 8, 8, false, 2);
  const auto snap = make_press(cfg("snapkv", 32));
  {
    PressInput in = l.input(0, 1, 3);
    in.n_head_kv = 3;
    expect_error([&] { snap->compress(in, 32); }, {"press snapkv", "layer 3", "n_head_kv = 3", "n_head = 4"});
  }
  {
    PressInput in = l.input();
    in.keys.pop_back();
    expect_error([&] { snap->compress(in, 32); }, {"1 key views", "n_head_kv = 2"});
  }
  {
    PressInput in = l.input();
    in.keys[1].n = 99;
    expect_error([&] { snap->compress(in, 32); }, {"keys[1]", "99 rows"});
  }
  {
    PressInput in = l.input();
    expect_error([&] { snap->compress(in, 5); }, {"capacity = 5", "window = 8"});
    in.window = 100;
    expect_error([&] { snap->compress(in, 50); }, {"window = 100", "n_tokens = 100"});
    in.window = 8;
    in.window_q = nullptr;
    expect_error([&] { snap->compress(in, 50); }, {"window_q"});
  }
  {
    PressInput in = l.input();
    in.compress_index = 2;
    expect_error([&] { make_press(cfg("pyramidkv", 32))->compress(in, 32); }, {"compress_index = 2"});
  }
  {
    PressInput in = l.input();
    in.all_q = nullptr;
    expect_error([&] { make_press(cfg("h2o", 32))->compress(in, 32); }, {"press h2o", "all_q"});
  }
  {
    // Every press protects window and sinks: a capacity below W + S (which make_press() and
    // press_capacity() never produce) is an error, also for streamingllm.
    PressConfig c = cfg("streamingllm", 36);
    c.sinks = 4;
    expect_error([&] { make_press(c)->compress(l.input(), 4); }, {"press streamingllm", "capacity = 4", "window = 8"});
    expect_error([&] { make_press(c)->compress(l.input(), 11); }, {"capacity 11", "window 8 + sinks 4 = 12"});
  }
}

TEST(PressConfig, RowsViewConvertsF16AndF32) {
  const std::vector<float> f = {1.5f, -2.25f, 0.0f, 65504.0f, 1e-3f, 3.0f};
  std::vector<uint16_t> h(f.size());
  for (size_t i = 0; i < f.size(); ++i) h[i] = fp32_to_fp16(f[i]);
  float out[3];
  RowsView v32{f.data(), KVType::F32, 2, 3};
  v32.row(1, out);
  EXPECT_EQ(std::vector<float>(out, out + 3), (std::vector<float>{65504.0f, 1e-3f, 3.0f}));
  RowsView v16{h.data(), KVType::F16, 2, 3};
  v16.row(1, out);
  EXPECT_EQ(out[0], 65504.0f);
  EXPECT_EQ(out[1], fp16_to_fp32(fp32_to_fp16(1e-3f)));
  EXPECT_EQ(out[2], 3.0f);
  v16.row(0, out);
  EXPECT_EQ(std::vector<float>(out, out + 3), (std::vector<float>{1.5f, -2.25f, 0.0f}));
  expect_error([&] { v16.row(2, out); }, {"row 2", "[0, 2)"});
  // A long f16 row goes through the 8-wide path and the scalar tail.
  std::vector<uint16_t> longh(19);
  for (size_t i = 0; i < longh.size(); ++i) longh[i] = fp32_to_fp16(static_cast<float>(i) * 0.5f - 3.0f);
  std::vector<float> lo(19);
  RowsView{longh.data(), KVType::F16, 1, 19}.row(0, lo.data());
  for (size_t i = 0; i < lo.size(); ++i) EXPECT_EQ(lo[i], static_cast<float>(i) * 0.5f - 3.0f);
}

}  // namespace
}  // namespace snapkv::test
