// Shared by the runner tests: presses and samples from short lists, and the check that the
// fork-based runner gives what independent runs give.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "eval/runner.h"
#include "eval/tasks.h"
#include "snapkv/snapkv.h"

namespace snapkv::eval {

inline std::vector<PressRun> presses(const std::vector<std::string>& specs) {
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
inline std::vector<Sample> samples(Generator& g, const std::vector<Case>& cases, int n) {
  std::vector<Sample> out;
  for (const Case& c : cases)
    for (int i = 0; i < n; ++i) out.push_back(g.make({c.task, c.length, 99, i, c.depth}));
  return out;
}

inline void expect_same(const Record& a, const Record& b, const std::string& what) {
  EXPECT_EQ(a.sample_id, b.sample_id) << what;
  EXPECT_EQ(a.question, b.question) << what;
  EXPECT_EQ(a.tokens, b.tokens) << what << " " << a.press;
  EXPECT_EQ(a.answer, b.answer) << what << " " << a.press;
  EXPECT_EQ(a.score, b.score) << what << " " << a.press;
  EXPECT_EQ(a.stop, b.stop) << what;
}

/// `protocols`: of the generating tasks (fidelity always runs continuation).
inline void fork_equals_independent(const Engine& e, const std::vector<Sample>& ss, const std::vector<PressRun>& ps,
                                    int gen_tokens,
                                    std::vector<Protocol> protocols = {Protocol::Aware, Protocol::Agnostic,
                                                                       Protocol::Multi}) {
  Workspace ws(e);
  RunnerOptions fo, io;
  fo.gen_tokens = io.gen_tokens = gen_tokens;
  io.independent = true;
  Runner forked(e, ws, fo), alone(e, ws, io);
  for (const Sample& s : ss) {
    const std::vector<Protocol> protos =
        s.task == "fidelity" ? std::vector<Protocol>{Protocol::Continuation} : protocols;
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

}  // namespace snapkv::eval
