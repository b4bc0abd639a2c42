// Press specs: syntax (parse / to_string / set / get), validation errors naming the bad key or
// value (table-driven), press_params() of every registered press, canonical specs and their
// round trip, the PressConfig -> PressSpec mapping, and Press::plan().
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "press_test_util.h"
#include "snapkv/press_spec.h"

namespace snapkv::test {
namespace {

/// Runs f, expects snapkv::Error (one line) whose message contains every part.
template <class F>
void expect_error(F&& f, const std::vector<std::string>& parts, const std::string& what) {
  try {
    f();
    ADD_FAILURE() << what << ": no error thrown (expected one mentioning " << parts.front() << ")";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << what << ": '" << p << "' not in: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << what << ": one line: " << msg;
  }
}

using Params = std::vector<std::pair<std::string, std::string>>;

TEST(PressSpec, ParsesNamesAndSettingsInOrder) {
  const PressSpec a = PressSpec::parse("snapkv");
  EXPECT_EQ(a.name, "snapkv");
  EXPECT_TRUE(a.params.empty());
  const PressSpec b = PressSpec::parse("snapkv:budget=1024,window=32,kernel=7,pool=max");
  EXPECT_EQ(b.name, "snapkv");
  EXPECT_EQ(b.params, (Params{{"budget", "1024"}, {"window", "32"}, {"kernel", "7"}, {"pool", "max"}}));
  EXPECT_EQ(b.to_string(), "snapkv:budget=1024,window=32,kernel=7,pool=max");
  EXPECT_EQ(PressSpec::parse("adakv:ratio=1e-3,alpha=0.25").params, (Params{{"ratio", "1e-3"}, {"alpha", "0.25"}}));
  EXPECT_EQ(PressSpec{}.to_string(), "none");
  // Values may hold any non-space character but ',' and '=' (':' included); meaning is checked later.
  EXPECT_EQ(PressSpec::parse("x-y_1:a_b=-1.5:+,c=MAX").params, (Params{{"a_b", "-1.5:+"}, {"c", "MAX"}}));
}

TEST(PressSpec, SetReplacesInPlaceOrAppendsAndGetFinds) {
  PressSpec s = PressSpec::parse("snapkv:budget=64,window=16");
  s.set("budget", "128");
  s.set("kernel", "5");
  EXPECT_EQ(s.to_string(), "snapkv:budget=128,window=16,kernel=5");
  EXPECT_EQ(s.get("window"), "16");
  EXPECT_EQ(s.get("pool"), std::nullopt);
  EXPECT_EQ(PressSpec::parse(s.to_string()), s);
}

TEST(PressSpec, SyntaxErrorsNamePositionAndText) {
  struct Bad {
    std::string text;
    std::vector<std::string> parts;
  };
  const std::vector<Bad> table = {
      {"", {"press spec is empty"}},
      {":budget=1", {"empty press name", "position 1"}},
      {"snap kv", {"byte 0x20", "press name", "position 5"}},
      {"snap/kv", {"'/'", "press name", "position 5"}},
      {"snapkv:", {"':' must be followed by key=value", "position 7"}},
      {"snapkv:budget", {"setting 'budget' has no '='", "position 8"}},
      {"snapkv:=5", {"setting '=5' has an empty key", "position 8"}},
      {"snapkv:budget=", {"key 'budget' has an empty value", "position 15"}},
      {"snapkv:budget=1,,window=3", {"empty setting", "position 17"}},
      {"snapkv:budget=1,", {"empty setting", "position 17"}},
      {"snapkv:budget=1,budget=2", {"key 'budget' given twice", "position 17"}},
      {"snapkv:bud get=1", {"byte 0x20", "in the key 'bud get'", "position 11"}},
      {"snapkv:budget=1=2", {"unexpected '='", "value of 'budget'", "position 16"}},
      {"snapkv:budget=10 24", {"byte 0x20", "value of 'budget'", "position 17"}},
      {"snapkv:window=3\t", {"byte 0x09", "position 16"}},
  };
  for (const Bad& b : table) {
    expect_error([&] { PressSpec::parse(b.text); }, b.parts, "'" + b.text + "'");
    // The text is echoed with control bytes escaped, so the message stays one printable line.
    std::string shown;
    for (const char ch : b.text) shown += ch == '\t' ? std::string("\\x09") : std::string(1, ch);
    if (!b.text.empty()) expect_error([&] { PressSpec::parse(b.text); }, {"'" + shown + "'"}, b.text);
  }
}

TEST(PressSpec, ValidationErrorsNameKeyValueAndPress) {
  const std::string snap_keys =
      "valid keys: budget, ratio, window, window_min, window_max, sinks, alloc, beta, alpha, span_gap, kernel, "
      "pool, gqa_agg)";
  struct Bad {
    std::string text;
    std::vector<std::string> parts;
  };
  const std::vector<Bad> table = {
      {"snapkvv",
       {"unknown press 'snapkvv'", "none, snapkv, pyramidkv, adakv, streamingllm, h2o, tova, knorm, random"}},
      {"SnapKV", {"unknown press 'SnapKV'"}},
      {"none:budget=5", {"press none takes no settings", "budget=5"}},
      {"snapkv:kernal=7", {"press snapkv", "unknown key 'kernal'", snap_keys}},
      {"knorm:kernel=7",
       {"press knorm", "unknown key 'kernel'",
        "valid keys: budget, ratio, window, window_min, window_max, sinks, alloc, "
        "beta, alpha, span_gap)"}},
      {"tova:pool=max", {"press tova", "unknown key 'pool'", "gqa_agg"}},
      {"random:gqa_agg=max", {"press random", "unknown key 'gqa_agg'", "seed"}},
      {"streamingllm:kernel=7", {"press streamingllm", "unknown key 'kernel'"}},
      {"snapkv:budget=abc", {"press snapkv", "budget=abc", "an integer >= 1"}},
      {"snapkv:budget=0", {"budget=0", "an integer >= 1"}},
      {"snapkv:budget=-5", {"budget=-5"}},
      {"snapkv:budget=1.5", {"budget=1.5"}},
      {"snapkv:budget=99999999999999999999", {"budget=99999999999999999999"}},
      {"snapkv:budget=10", {"press snapkv", "budget=10 is smaller than window=32 + sinks=0"}},
      {"snapkv:window=2000", {"budget=1024 (the default) is smaller than window=2000"}},
      {"streamingllm:budget=35", {"press streamingllm", "budget=35", "window=32 + sinks=4"}},
      {"snapkv:budget=40,sinks=9", {"budget=40", "window=32 + sinks=9"}},
      {"snapkv:window=0", {"window=0", "an integer in [1, 16777216]"}},
      {"snapkv:window=16777217", {"window=16777217", "[1, 16777216]"}},
      {"snapkv:kernel=4", {"kernel=4", "an odd integer in [1, 16777216]"}},
      {"snapkv:kernel=0", {"kernel=0", "odd"}},
      {"snapkv:kernel=16777219", {"kernel=16777219", "[1, 16777216]"}},
      {"snapkv:sinks=-1", {"sinks=-1", "[0, 16777216]"}},
      {"h2o:sinks=16777217", {"press h2o", "sinks=16777217"}},
      {"snapkv:pool=xx", {"pool=xx", "one of max|avg"}},
      {"snapkv:pool=1", {"pool=1", "max|avg"}},
      {"tova:gqa_agg=xx", {"press tova", "gqa_agg=xx", "one of mean|max|sum"}},
      {"knorm:alloc=foo", {"press knorm", "alloc=foo", "one of uniform|pyramid|ada"}},
      {"snapkv:ratio=1", {"ratio=1", "a number in [0, 1)"}},
      {"snapkv:ratio=-0.5", {"ratio=-0.5", "[0, 1)"}},
      {"snapkv:ratio=nan", {"ratio=nan"}},
      {"snapkv:ratio=inf", {"ratio=inf"}},
      {"snapkv:ratio=0.5x", {"ratio=0.5x"}},
      {"snapkv:budget=64,ratio=0.5", {"press snapkv", "budget or ratio, not both", "budget=64", "ratio=0.5"}},
      {"pyramidkv:beta=0.5", {"press pyramidkv", "beta=0.5", "a finite number >= 1"}},
      {"pyramidkv:beta=inf", {"beta=inf", "finite"}},
      {"snapkv:beta=5", {"press snapkv", "beta applies only to alloc=pyramid", "alloc is uniform"}},
      {"pyramidkv:alloc=uniform,beta=5", {"beta applies only to alloc=pyramid"}},
      {"knorm:alloc=ada,beta=2", {"press knorm", "beta applies only to alloc=pyramid", "alloc is ada"}},
      {"adakv:alpha=1.5", {"press adakv", "alpha=1.5", "a number in [0, 1]"}},
      {"adakv:alpha=-0.1", {"alpha=-0.1"}},
      {"snapkv:alpha=0.5", {"alpha applies only to alloc=ada", "alloc is uniform"}},
      {"random:seed=-1", {"press random", "seed=-1", "an unsigned 64-bit integer"}},
      {"random:seed=18446744073709551616", {"seed=18446744073709551616"}},
  };
  for (const Bad& b : table) {
    expect_error([&] { validate_press_spec(PressSpec::parse(b.text)); }, b.parts, b.text);
    expect_error([&] { make_press(PressSpec::parse(b.text)); }, b.parts, b.text);  // same checks
  }
  // Built by hand: a key twice.
  PressSpec twice{"snapkv", {{"budget", "64"}, {"budget", "128"}}};
  expect_error([&] { validate_press_spec(twice); }, {"press snapkv", "key 'budget' given twice"}, "twice");
}

TEST(PressSpec, ValidSpecs) {
  for (const char* text :
       {"none", "snapkv", "snapkv:budget=1024,window=32,kernel=7,pool=max", "snapkv:budget=32", "knorm:alloc=ada",
        "tova:alloc=pyramid,beta=4", "adakv:ratio=0.5,alpha=0", "adakv:alpha=1", "pyramidkv:beta=1",
        "streamingllm:sinks=0,budget=32", "random:seed=18446744073709551615", "h2o:ratio=0", "tova:ratio=0.999",
        "snapkv:window=16777216,sinks=16777216,budget=33554432,kernel=16777215", "knorm:budget=9223372036854775807"}) {
    EXPECT_NO_THROW(validate_press_spec(PressSpec::parse(text))) << text;
  }
}

TEST(PressSpec, ParamsOfEveryPress) {
  expect_error([] { press_params("nosuch"); }, {"unknown press 'nosuch'", "none, snapkv"}, "press_params");
  EXPECT_TRUE(press_params("none").empty());
  const std::vector<std::string> common = {"budget", "ratio", "window", "window_min", "window_max",
                                           "sinks",  "alloc", "beta",   "alpha",      "span_gap"};
  const std::map<std::string, std::vector<std::string>> own = {{"snapkv", {"kernel", "pool", "gqa_agg"}},
                                                               {"pyramidkv", {"kernel", "pool", "gqa_agg"}},
                                                               {"adakv", {"kernel", "pool", "gqa_agg"}},
                                                               {"streamingllm", {}},
                                                               {"h2o", {"gqa_agg"}},
                                                               {"tova", {"gqa_agg"}},
                                                               {"knorm", {}},
                                                               {"random", {"seed"}}};
  for (const std::string& name : press_names()) {
    if (name == "none") continue;
    ASSERT_TRUE(own.count(name)) << name << ": a new press? add its keys here";
    std::vector<std::string> keys;
    for (const auto& p : press_params(name)) {
      keys.push_back(p.key);
      EXPECT_FALSE(p.doc.empty()) << name << " " << p.key;
      // Every key with its default value validates (beta / alpha with their allocator).
      if (p.default_value.empty()) continue;
      PressSpec s{name, {{p.key, p.default_value}}};
      if (p.key == "beta") s.set("alloc", "pyramid");
      if (p.key == "alpha") s.set("alloc", "ada");
      if (p.key == "window_min" || p.key == "window_max") s.set("window", "question");
      EXPECT_NO_THROW(validate_press_spec(s)) << s.to_string();
    }
    std::vector<std::string> expect = common;
    expect.insert(expect.end(), own.at(name).begin(), own.at(name).end());
    EXPECT_EQ(keys, expect) << name;
    const auto def = [&](const std::string& key) {
      for (const auto& p : press_params(name))
        if (p.key == key) return p.default_value;
      return std::string("?");
    };
    EXPECT_EQ(def("budget"), "1024");
    EXPECT_EQ(def("ratio"), "");
    EXPECT_EQ(def("window"), "32");
    EXPECT_EQ(def("sinks"), name == "streamingllm" ? "4" : "0");
    EXPECT_EQ(def("alloc"), name == "pyramidkv" ? "pyramid" : name == "adakv" ? "ada" : "uniform");
    EXPECT_EQ(def("beta"), "20");
    EXPECT_EQ(def("alpha"), "0.2");
  }
}

TEST(PressSpec, CanonicalSpecHasEveryKeyResolved) {
  const auto canon = [](const std::string& text) { return make_press(PressSpec::parse(text))->spec().to_string(); };
  EXPECT_EQ(canon("none"), "none");
  EXPECT_EQ(canon("snapkv"),
            "snapkv:budget=1024,window=32,sinks=0,alloc=uniform,span_gap=0,kernel=7,pool=max,gqa_agg=mean");
  EXPECT_EQ(canon("pyramidkv:budget=256"),
            "pyramidkv:budget=256,window=32,sinks=0,alloc=pyramid,beta=20,span_gap=0,kernel=7,pool=max,gqa_agg=mean");
  EXPECT_EQ(canon("adakv:pool=avg,ratio=0.50,alpha=0.25"),
            "adakv:ratio=0.5,window=32,sinks=0,alloc=ada,alpha=0.25,span_gap=0,kernel=7,pool=avg,gqa_agg=mean");
  EXPECT_EQ(canon("streamingllm"), "streamingllm:budget=1024,window=32,sinks=4,alloc=uniform,span_gap=0");
  EXPECT_EQ(canon("knorm:alloc=ada,window=016"), "knorm:budget=1024,window=16,sinks=0,alloc=ada,alpha=0.2,span_gap=0");
  EXPECT_EQ(canon("tova:alloc=pyramid,beta=4.0"),
            "tova:budget=1024,window=32,sinks=0,alloc=pyramid,beta=4,span_gap=0,gqa_agg=mean");
  EXPECT_EQ(canon("random:seed=7"), "random:budget=1024,window=32,sinks=0,alloc=uniform,span_gap=0,seed=7");
  EXPECT_EQ(canon("h2o:ratio=-0"), "h2o:ratio=0,window=32,sinks=0,alloc=uniform,span_gap=0,gqa_agg=mean");
}

// Every press: spec() lists each of its keys (ratio only when set, beta/alpha with their
// allocator), reads back through to_string/parse, and builds the same press again.
TEST(PressSpec, EveryPressRoundTrips) {
  for (const std::string& name : press_names()) {
    for (const std::string& extra : {std::string(), std::string("ratio=0.25"), std::string("alloc=ada,sinks=2")}) {
      if (name == "none" && !extra.empty()) continue;
      const std::string text = extra.empty() ? name : name + ":" + extra;
      const auto p = make_press(PressSpec::parse(text));
      const PressSpec& s = p->spec();
      EXPECT_EQ(s.name, name);
      EXPECT_EQ(p->name(), name);
      EXPECT_EQ(PressSpec::parse(s.to_string()), s) << text;
      EXPECT_EQ(make_press(s)->spec(), s) << text;
      EXPECT_NO_THROW(validate_press_spec(s));
      std::set<std::string> keys;
      for (const auto& [k, v] : s.params) keys.insert(k);
      for (const auto& info : press_params(name)) {
        const std::string alloc = s.get("alloc").value_or("");
        const bool expected = info.key == "ratio"    ? extra.starts_with("ratio")
                              : info.key == "budget" ? !extra.starts_with("ratio")
                              : info.key == "beta"   ? alloc == "pyramid"
                              : info.key == "alpha"  ? alloc == "ada"
                              : info.key == "window_min" || info.key == "window_max"
                                  ? s.get("window") == std::optional<std::string>("question")
                                  : true;
        EXPECT_EQ(keys.count(info.key), expected ? 1u : 0u) << text << " key " << info.key;
      }
      EXPECT_EQ(p->window(), name == "none" ? 0 : 32) << text;
      EXPECT_EQ(p->sinks(), name == "none"                               ? 0
                            : extra.find("sinks=2") != std::string::npos ? 2
                            : name == "streamingllm"                     ? 4
                                                                         : 0)
          << text;
      EXPECT_EQ(p->needs_all_queries(), name == "h2o") << text;
    }
  }
}

TEST(PressSpec, PressConfigMapsToTheSpecOfItsPress) {
  PressConfig c;
  c.name = "snapkv";
  c.budget = 64;
  c.window = 16;
  c.kernel = 5;
  c.pool = PoolType::Avg;
  c.gqa_agg = GQAAgg::Max;
  EXPECT_EQ(to_spec(c).to_string(), "snapkv:budget=64,window=16,kernel=5,pool=avg,gqa_agg=max");
  c.name = "streamingllm";
  EXPECT_EQ(to_spec(c).to_string(), "streamingllm:budget=64,window=16,sinks=4");
  c.name = "pyramidkv";
  c.budget = 0;
  c.compression_ratio = 0.3;
  c.pyramid_beta = 2.5;
  EXPECT_EQ(to_spec(c).to_string(), "pyramidkv:ratio=0.3,window=16,kernel=5,pool=avg,gqa_agg=max,beta=2.5");
  c.name = "random";
  c.seed = 99;
  EXPECT_EQ(to_spec(c).to_string(), "random:ratio=0.3,window=16,seed=99");
  c.name = "none";
  EXPECT_EQ(to_spec(c).to_string(), "none");
  for (const std::string& name : press_names()) {
    PressConfig d;
    d.name = name;
    d.budget = name == "none" ? 0 : 100;
    EXPECT_EQ(make_press(d)->spec(), make_press(to_spec(d))->spec()) << name;
  }
}

TEST(PressPlan, ShortPromptsAreServedUncompressedWithAReason) {
  const auto plan = [](const std::string& text, int64_t L) { return make_press(PressSpec::parse(text))->plan(L); };
  const auto expect_plan = [&](const std::string& text, int64_t L, bool compress, int64_t C,
                               const std::string& reason_part) {
    const Press::Plan p = plan(text, L);
    EXPECT_EQ(p.compress, compress) << text << " L=" << L;
    EXPECT_EQ(p.capacity, C) << text << " L=" << L;
    if (compress) {
      EXPECT_TRUE(p.reason.empty()) << p.reason;
    } else {
      EXPECT_NE(p.reason.find(reason_part), std::string::npos) << text << " L=" << L << ": " << p.reason;
    }
  };
  expect_plan("snapkv:budget=100", 1000, true, 100, "");
  expect_plan("snapkv:budget=100", 101, true, 100, "");
  expect_plan("snapkv:budget=100", 100, false, 100, "prompt of 100 tokens fits the budget 100");
  expect_plan("snapkv:budget=100", 20, false, 100, "prompt of 20 tokens fits the budget 100");
  expect_plan("snapkv:budget=100", 0, false, 100, "fits");
  expect_plan("snapkv:ratio=0.75", 1000, true, 250, "");  // 1000 - floor(750)
  expect_plan("snapkv:ratio=0.3", 1001, true, 1001 - 300, "");
  expect_plan("snapkv:ratio=0", 500, false, 500, "prompt of 500 tokens fits the capacity 500 left by ratio=0");
  expect_plan("snapkv:ratio=0.75", 20, false, 5, "prompt of 20 tokens is too short to compress (window=32 + sinks=0");
  expect_plan("snapkv:ratio=0.75", 32, false, 8, "too short");
  expect_plan("snapkv:ratio=0.5,sinks=4", 36, false, 18, "window=32 + sinks=4");
  expect_plan("streamingllm:ratio=0.96", 1000, true, 40, "");
  expect_plan("streamingllm:ratio=0.5", 36, false, 18, "too short");
  expect_plan("tova:ratio=0.5,window=4", 9, true, 5, "");
  expect_plan("none", 1234, false, 1234, "press none keeps every token");
  // A ratio leaving fewer than window + sinks of a longer prompt is an error (never a silent clamp).
  expect_error([&] { plan("snapkv:ratio=0.75", 33); },
               {"press snapkv", "ratio=0.75", "leaves 9 of 33", "window=32 + sinks=0"}, "ratio");
  expect_error([&] { plan("streamingllm:ratio=0.99", 1000); }, {"leaves 10 of 1000", "sinks=4"}, "ratio");
  expect_error([&] { plan("streamingllm:ratio=0.5", 37); }, {"leaves 19 of 37"}, "ratio");
  expect_error([&] { plan("snapkv", -1); }, {"n_tokens = -1"}, "negative");
}

}  // namespace
}  // namespace snapkv::test
