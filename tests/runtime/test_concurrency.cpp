// One engine shared by several OS threads, each stepping its own batches on its own workspace:
// batched decode, a prefill advanced in slices, fork + compress, generate and the tokenizer, all
// at once, give exactly what they give one after another. Workspaces use one OpenMP thread.
// scripts/test.sh runs it under ThreadSanitizer too (clang's libomp with Archer, which also
// checks multi-thread teams: Threads.ConcurrentEnginesWithDifferentThreadCounts).
#include <gtest/gtest.h>

#include <thread>

#include "runtime/runtime_util.h"

namespace snapkv {
namespace {

using rtest::prompt;

/// What one worker's workload produced: every sampled token and the final cache sizes.
struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<size_t> bytes;
  std::string text;
  bool operator==(const Outcome&) const = default;
};

Outcome workload(const Engine& e, uint64_t seed) {
  const int V = e.info().n_vocab;
  WorkspaceOptions wo;
  wo.n_threads = 1;
  wo.max_rows = 48;
  Workspace ws(e, wo);
  Outcome out;
  std::vector<std::unique_ptr<Sequence>> seqs;
  std::vector<int32_t> next;
  const char* presses[3] = {"none", "snapkv:budget=40,window=8", "tova:budget=32,window=8"};
  for (int i = 0; i < 3; ++i) {
    seqs.push_back(e.new_sequence({}));
    PrefillOptions po;
    po.press = PressSpec::parse(presses[i]);
    next.push_back(argmax(e.prefill(*seqs.back(), prompt(60 + 30 * static_cast<size_t>(i), V, seed + i), po, ws)));
  }
  // A fourth prompt prefilled in slices between the decode steps, keeping its window queries.
  auto late = e.new_sequence({});
  PrefillOptions lo;
  lo.retain_window = 8;
  late->begin_prefill(prompt(150, V, seed + 10), lo);
  Batch b;
  for (int s = 0; s < 12; ++s) {
    b.clear();
    for (size_t i = 0; i < seqs.size(); ++i) b.add(*seqs[i], next[i]);
    if (late->prefilling()) b.add_prefill(*late, 200);
    e.step(b, ws);
    for (size_t i = 0; i < seqs.size(); ++i) {
      next[i] = argmax(b.logits(static_cast<int>(i)));
      out.tokens.push_back(next[i]);
    }
  }
  EXPECT_FALSE(late->prefilling());
  auto fork = late->fork();
  fork->compress(PressSpec::parse("snapkv:budget=48,window=8"), ws);
  out.bytes.push_back(fork->stats().kv_cache_bytes);
  out.bytes.push_back(late->stats().kv_cache_bytes);
  for (const auto& s : seqs) out.bytes.push_back(s->stats().kv_cache_bytes);
  // generate() with the shared tokenizer.
  GenerateOptions go;
  go.n_predict = 8;
  go.sampling.seed = seed;
  go.stop = {"zzz"};
  auto g = e.new_sequence({});
  const auto ids = e.tokenizer().encode("Once upon a time", true, false);
  const GenerateResult r = generate(e, *g, ids, {}, go, ws);
  out.text = r.text;
  out.tokens.insert(out.tokens.end(), r.tokens.begin(), r.tokens.end());
  return out;
}

TEST(Concurrency, WorkersOfOneEngineMatchTheirSerialRuns) {
  auto e = rtest::stories(1);
  const int n = 4;
  std::vector<Outcome> serial;
  for (int i = 0; i < n; ++i) serial.push_back(workload(*e, 100 * static_cast<uint64_t>(i)));
  std::vector<Outcome> got(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&, i] { got[static_cast<size_t>(i)] = workload(*e, 100 * static_cast<uint64_t>(i)); });
  for (auto& t : threads) t.join();
  for (int i = 0; i < n; ++i) EXPECT_EQ(got[static_cast<size_t>(i)], serial[static_cast<size_t>(i)]) << "worker " << i;
}

}  // namespace
}  // namespace snapkv
