// The fork-based runner: a press whose budget covers the whole prompt scores exactly as none,
// sample by sample; one prefill + forks gives what independent runs (a fresh prefill with the
// press, decoded alone) give, for every protocol and the fidelity measure.
#include <gtest/gtest.h>

#include "eval/runner.h"
#include "eval/tasks.h"
#include "eval_test_util.h"

namespace snapkv::eval {
namespace {

std::vector<PressRun> presses(const std::vector<std::string>& specs) {
  std::vector<PressRun> p;
  for (const auto& s : specs) p.push_back(resolve_press(s));
  return p;
}

struct Case {
  std::string task;
  int64_t length;
  double depth;
};

// Samples of `cases`, `n` each.
std::vector<Sample> samples(Generator& g, const std::vector<Case>& cases, int n) {
  std::vector<Sample> out;
  for (const Case& c : cases)
    for (int i = 0; i < n; ++i) out.push_back(g.make({c.task, c.length, 99, i, c.depth}));
  return out;
}

const std::vector<Case> kTinyCases = {
    {"niah_single_1", 640, -1},   {"niah_single_2", 640, -1}, {"niah_multikey_1", 640, -1},
    {"niah_multiquery", 640, -1}, {"fwe", 640, -1},           {"niah_grid", 640, 0.5}};

void expect_same(const Record& a, const Record& b, const std::string& what) {
  EXPECT_EQ(a.sample_id, b.sample_id) << what;
  EXPECT_EQ(a.question, b.question) << what;
  EXPECT_EQ(a.tokens, b.tokens) << what << " " << a.press;
  EXPECT_EQ(a.answer, b.answer) << what << " " << a.press;
  EXPECT_EQ(a.score, b.score) << what << " " << a.press;
  EXPECT_EQ(a.stop, b.stop) << what;
}

TEST(Runner, PressWithBudgetCoveringThePromptScoresExactlyAsNone) {
  auto e = etest::stories();
  Workspace ws(*e);
  PromptFormat pf(*e, ChatMode::Off);
  Generator g(pf);
  RunnerOptions ro;
  ro.gen_tokens = 24;
  Runner run(*e, ws, ro);
  const auto ps = presses({"none", "snapkv:budget=100000", "knorm:budget=4096,window=8", "tova:ratio=0"});
  for (const Sample& s : samples(g, kTinyCases, 2)) {
    for (Protocol p : {Protocol::Aware, Protocol::Agnostic, Protocol::Multi}) {
      const auto recs = run.run(s, ps, p);
      const size_t nq = p == Protocol::Multi ? s.questions.size() : 1;
      ASSERT_EQ(recs.size(), ps.size() * nq) << s.id;
      for (size_t k = 0; k < recs.size(); ++k) {
        const Record& none = recs[k % nq];  // press-major: the first nq records are none's
        EXPECT_EQ(none.press_name, "none");
        EXPECT_FALSE(recs[k].compressed) << recs[k].press;
        EXPECT_EQ(recs[k].kv_cache_bytes, none.kv_cache_bytes) << recs[k].press;
        expect_same(recs[k], none, s.id + " " + protocol_name(p));
      }
    }
  }
}

void fork_equals_independent(const Engine& e, const std::vector<Sample>& ss, const std::vector<PressRun>& ps,
                             int gen_tokens) {
  Workspace ws(e);
  RunnerOptions fo, io;
  fo.gen_tokens = io.gen_tokens = gen_tokens;
  io.independent = true;
  Runner forked(e, ws, fo), alone(e, ws, io);
  for (const Sample& s : ss) {
    const std::vector<Protocol> protos =
        s.task == "fidelity" ? std::vector<Protocol>{Protocol::Continuation}
                             : std::vector<Protocol>{Protocol::Aware, Protocol::Agnostic, Protocol::Multi};
    for (Protocol p : protos) {
      const auto a = forked.run(s, ps, p), b = alone.run(s, ps, p);
      ASSERT_EQ(a.size(), b.size()) << s.id;
      bool some_compressed = false;
      for (size_t k = 0; k < a.size(); ++k) {
        const std::string what = s.id + " " + protocol_name(p) + " " + a[k].press;
        EXPECT_EQ(a[k].press, b[k].press);
        EXPECT_EQ(a[k].kv_cache_bytes, b[k].kv_cache_bytes) << what;
        EXPECT_EQ(a[k].compressed, b[k].compressed) << what;
        EXPECT_FALSE(b[k].forked) << what;
        EXPECT_EQ(a[k].forked, !a[k].press.starts_with("h2o")) << what;  // h2o needs every query: its own prefill
        some_compressed = some_compressed || a[k].compressed;
        if (p == Protocol::Continuation) {
          EXPECT_TRUE(a[k].has_fidelity);
          EXPECT_EQ(a[k].fidelity.n, 256);
          EXPECT_DOUBLE_EQ(a[k].fidelity.kl, b[k].fidelity.kl) << what;
          EXPECT_DOUBLE_EQ(a[k].fidelity.top1, b[k].fidelity.top1) << what;
          EXPECT_DOUBLE_EQ(a[k].fidelity.ppl, b[k].fidelity.ppl) << what;
          if (a[k].press_name == "none") {
            EXPECT_EQ(a[k].fidelity.kl, 0.0);
          }
        } else {
          expect_same(a[k], b[k], what);
        }
      }
      EXPECT_TRUE(some_compressed) << s.id;
    }
  }
}

TEST(Runner, ForkBasedEqualsIndependentRunsTiny) {
  auto e = etest::stories();
  PromptFormat pf(*e, ChatMode::Off);
  Generator g(pf);
  std::vector<Case> cases = kTinyCases;
  cases.push_back({"fidelity", 640, -1});
  const auto ps = presses({"none", "snapkv:budget=64,window=16", "streamingllm:budget=48", "tova:budget=80,window=8",
                           "h2o:budget=64,window=8", "adakv:ratio=0.5", "pyramidkv:ratio=0.75,window=16",
                           "knorm:budget=100,window=4", "random:ratio=0.5"});
  fork_equals_independent(*e, samples(g, cases, 1), ps, 24);
}

TEST(Runner, ForkBasedEqualsIndependentRunsSmolLM2) {
  auto e = etest::smollm2();
  if (!e) GTEST_SKIP() << "SmolLM2 not in the model cache (scripts/get-model.sh smollm2)";
  PromptFormat pf(*e, ChatMode::Auto);
  Generator g(pf);
  // niah_multikey_1: multi asks its 4 keys from copies of one compressed state.
  const auto ss = samples(g, {{"niah_multikey_1", 1024, -1}, {"fidelity", 1024, -1}}, 1);
  const auto ps = presses({"none", "snapkv:ratio=0.75", "h2o:ratio=0.5"});
  fork_equals_independent(*e, ss, ps, 8);
}

TEST(Runner, ProtocolMustFitTheSampleAndSkipDropsWork) {
  auto e = etest::stories();
  Workspace ws(*e);
  PromptFormat pf(*e, ChatMode::Off);
  Generator g(pf);
  RunnerOptions ro;
  ro.gen_tokens = 4;
  Runner run(*e, ws, ro);
  const auto ps = presses({"none", "snapkv:budget=64,window=16"});
  const Sample fid = g.make({"fidelity", 512, 1, 0, -1});
  const Sample niah = g.make({"niah_single_2", 512, 1, 0, -1});
  EXPECT_THROW(run.run(fid, ps, Protocol::Aware), Error);
  EXPECT_THROW(run.run(niah, ps, Protocol::Continuation), Error);
  const auto recs = run.run(niah, ps, Protocol::Aware, [](size_t press, int) { return press == 0; });
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].press_name, "snapkv");
  EXPECT_TRUE(recs[0].compressed);
  EXPECT_LT(recs[0].kv_cache_bytes, recs[0].kv_cache_bytes_full);
  EXPECT_TRUE(run.run(niah, ps, Protocol::Aware, [](size_t, int) { return true; }).empty());
  // The canonical spec of a record names every key.
  EXPECT_EQ(recs[0].press.rfind("snapkv:budget=64,window=16,", 0), 0u) << recs[0].press;
  const auto j = recs[0].to_json();
  EXPECT_EQ(record_key(nlohmann::json::parse(j.dump())), recs[0].key());
}

}  // namespace
}  // namespace snapkv::eval
