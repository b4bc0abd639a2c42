// generate(): greedy text against llama.cpp's golden continuation, stop strings (cut before the
// match, never streamed), streaming == final text, cancellation, n_predict / context limits, the
// query-agnostic protocol, and threading (two engines with different thread counts at once).
#include <gtest/gtest.h>

#include <thread>

#include "model/golden_util.h"
#include "runtime/runtime_util.h"
#include "support/synthetic_model.h"

namespace snapkv {
namespace {

using rtest::prompt;

GenerateOptions greedy(int64_t n) {
  GenerateOptions o;
  o.n_predict = n;
  o.sampling.temp = 0;
  o.ignore_eos = true;
  return o;
}

// stories260K's greedy continuation of "Once upon a time", as llama.cpp gives it (../shared golden).
TEST(Generate, GreedyTextIsLlamaCppsGolden) {
  auto e = rtest::stories();
  const auto g = test::read_json(test::golden_dir("stories260K", "kv_f16") / "golden.json");
  for (const auto& p : g["prompts"]) {
    if (p["name"] != "once_upon" && p["name"] != "lily_ball") continue;
    const auto ids = test::ids(p["token_ids"]);
    const auto gold = test::ids(p["greedy_token_ids"]);
    Workspace ws(*e);
    auto seq = e->new_sequence({});
    std::string streamed;
    GenerateOptions o = greedy(20);
    o.on_token = [&](int32_t, std::string_view t) {
      streamed += t;
      return true;
    };
    const GenerateResult r = generate(*e, *seq, ids, {}, o, ws);
    ASSERT_EQ(r.tokens.size(), 20u);
    EXPECT_EQ(r.tokens, std::vector<int32_t>(gold.begin(), gold.begin() + 20)) << p["name"];
    EXPECT_EQ(streamed, r.text);
    EXPECT_EQ(r.stop_reason, StopReason::NPredict);
    EXPECT_EQ(r.n_decode_steps, 19);
    EXPECT_GT(r.ttft_ms, 0);
    EXPECT_EQ(seq->n_past(), static_cast<int64_t>(ids.size()) + 19);
  }
}

TEST(Generate, StopStringsCutTheTextAndAreNeverStreamed) {
  auto e = rtest::stories();
  const auto ids = e->tokenizer().encode("Once upon a time", true, false);
  Workspace ws(*e);
  auto full_seq = e->new_sequence({});
  const GenerateResult full = generate(*e, *full_seq, ids, {}, greedy(24), ws);
  ASSERT_NE(full.text.find(" Lily"), std::string::npos) << full.text;
  for (const std::string stop : {" Lily", "Lil", "girl named", "y. She"}) {
    const size_t at = full.text.find(stop);
    if (at == std::string::npos) continue;
    auto seq = e->new_sequence({});
    std::string streamed;
    GenerateOptions o = greedy(24);
    o.stop = {"no such text", stop};
    o.on_token = [&](int32_t, std::string_view t) {
      streamed += t;
      return true;
    };
    const GenerateResult r = generate(*e, *seq, ids, {}, o, ws);
    EXPECT_EQ(r.stop_reason, StopReason::StopString) << stop;
    EXPECT_EQ(r.text, full.text.substr(0, at)) << stop;
    EXPECT_EQ(streamed, r.text) << stop;
    EXPECT_LT(r.tokens.size(), full.tokens.size());
  }
}

TEST(Generate, CancelLimitsAndErrors) {
  auto e = rtest::stories();
  const auto ids = e->tokenizer().encode("Lily had a red ball.", true, false);
  Workspace ws(*e);
  {
    auto seq = e->new_sequence({});
    GenerateOptions o = greedy(50);
    int n = 0;
    o.on_token = [&](int32_t id, std::string_view) { return id < 0 || ++n < 5; };
    const GenerateResult r = generate(*e, *seq, ids, {}, o, ws);
    EXPECT_EQ(r.stop_reason, StopReason::Cancelled);
    EXPECT_EQ(r.tokens.size(), 5u);
  }
  {
    // Cancelled while text is held back (the start of a stop string): the final call still comes
    // and brings it, so the stream holds all of the result's text (it ended without it before).
    std::vector<std::string> after;  // the text streamed after each token of a plain run
    {
      auto seq = e->new_sequence({});
      GenerateOptions o = greedy(12);
      std::string text;
      o.on_token = [&](int32_t id, std::string_view t) {
        text += t;
        if (id >= 0) after.push_back(text);
        return true;
      };
      (void)generate(*e, *seq, ids, {}, o, ws);
    }
    int checked = 0;
    for (size_t k = 1; k < after.size(); ++k) {
      const char last = after[k - 1].empty() ? '\0' : after[k - 1].back();
      if (last == '\0' || static_cast<unsigned char>(last) >= 0x80) continue;
      auto seq = e->new_sequence({});
      GenerateOptions o = greedy(12);
      o.stop = {std::string(1, last) + "\x01 never"};  // held back after token k, never matched
      std::string streamed;
      int n = 0, finals = 0;
      o.on_token = [&](int32_t id, std::string_view t) {
        streamed += t;
        if (id < 0) {
          ++finals;
          return false;  // ignored on the final call
        }
        return ++n < static_cast<int>(k);
      };
      const GenerateResult r = generate(*e, *seq, ids, {}, o, ws);
      EXPECT_EQ(r.stop_reason, StopReason::Cancelled) << k;
      EXPECT_EQ(r.tokens.size(), k);
      EXPECT_EQ(finals, 1) << k;
      EXPECT_EQ(streamed, r.text) << k;
      EXPECT_EQ(r.text, after[k - 1]) << k;
      ++checked;
    }
    EXPECT_GT(checked, 3);
  }
  {
    auto seq = e->new_sequence({});
    const GenerateResult r = generate(*e, *seq, ids, {}, greedy(0), ws);
    EXPECT_TRUE(r.tokens.empty());
    EXPECT_EQ(seq->n_past(), static_cast<int64_t>(ids.size()));
  }
  {
    SequenceOptions so;
    so.n_ctx = static_cast<int64_t>(ids.size()) + 3;
    auto seq = e->new_sequence(so);
    const GenerateResult r = generate(*e, *seq, ids, {}, greedy(50), ws);
    EXPECT_EQ(r.stop_reason, StopReason::ContextFull);
    EXPECT_EQ(r.tokens.size(), 4u);  // 3 decoded + the one sampled from the last position
    EXPECT_THROW(generate(*e, *seq, ids, {}, greedy(5), ws), Error);  // not empty
  }
  auto seq = e->new_sequence({});
  EXPECT_THROW(generate(*e, *seq, {}, {}, greedy(5), ws), Error);
  GenerateOptions bad = greedy(-1);
  EXPECT_THROW(generate(*e, *seq, ids, {}, bad, ws), Error);
  bad = greedy(5);
  bad.press = PressSpec::parse("snapkv:budget=2,window=32");
  EXPECT_THROW(generate(*e, *seq, ids, {}, bad, ws), Error);
  EXPECT_EQ(seq->n_past(), 0);
  SequenceOptions tiny;
  tiny.n_ctx = 3;
  auto small = e->new_sequence(tiny);
  EXPECT_THROW(generate(*e, *small, ids, {}, greedy(5), ws), Error);
}

// A model without a tokenizer: generate() refuses it before any work, the sequence left empty
// (it was found only after the prefill, which left the prompt in the sequence).
TEST(Generate, AModelWithoutATokenizerIsRefusedBeforeThePrefill) {
  SyntheticModelConfig cfg = small_q8_kv_config();
  cfg.with_tokenizer = false;
  const auto e = load_synthetic_engine(cfg, 1);
  ASSERT_FALSE(e->has_tokenizer());
  Workspace ws(*e);
  auto seq = e->new_sequence({});
  const std::vector<int32_t> ids = {1, 300, 301, 302};
  try {
    (void)generate(*e, *seq, ids, {}, greedy(4), ws);
    ADD_FAILURE() << "generated without a tokenizer";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("has no tokenizer"), std::string::npos) << err.what();
  }
  EXPECT_EQ(seq->n_past(), 0);
  EXPECT_FALSE(seq->prefilling());
}

TEST(Generate, QuestionIsAppendedAfterTheCompressedContext) {
  auto e = rtest::stories();
  const int V = e->info().n_vocab;
  const auto ctx = prompt(280, V, 11);
  const auto q = prompt(10, V, 12, -1);
  Workspace ws(*e);
  GenerateOptions o = greedy(8);
  o.press = PressSpec::parse("snapkv:budget=64,window=16");
  auto seq = e->new_sequence({});
  const GenerateResult r = generate(*e, *seq, ctx, q, o, ws);
  EXPECT_EQ(r.n_context_tokens, 280);
  EXPECT_EQ(r.n_question_tokens, 10);
  EXPECT_TRUE(seq->stats().compressed);
  EXPECT_EQ(seq->stats().n_prompt_tokens, 280);

  auto manual = e->new_sequence({});
  PrefillOptions po;
  po.press = o.press;
  e->prefill(*manual, ctx, po, ws);
  auto l = e->prefill(*manual, q, {}, ws);
  EXPECT_EQ(argmax(l), r.tokens[0]);
}

TEST(Generate, ShortPromptsAreKeptWholeAndSaySo) {
  auto e = rtest::stories();
  const auto ids = e->tokenizer().encode("Once upon a time", true, false);
  Workspace ws(*e);
  for (const std::string spec : {"snapkv:budget=1024", "snapkv:ratio=0.5,window=32", "streamingllm:budget=40"}) {
    auto seq = e->new_sequence({});
    GenerateOptions o = greedy(4);
    o.press = PressSpec::parse(spec);
    generate(*e, *seq, ids, {}, o, ws);
    EXPECT_FALSE(seq->stats().compressed) << spec;
    EXPECT_FALSE(seq->stats().compression_note.empty()) << spec;
    EXPECT_EQ(seq->stats().kv_cache_bytes, seq->stats().kv_cache_bytes_full) << spec;
  }
}

// Two engines with different thread counts (and one engine with two workspaces of different
// thread counts) used from two OS threads at once give the results they give alone.
TEST(Threads, ConcurrentEnginesWithDifferentThreadCounts) {
  auto e1 = rtest::stories(1), e3 = rtest::stories(3);
  const int V = e1->info().n_vocab;
  const auto p = prompt(350, V, 77);
  GenerateOptions o = greedy(24);
  o.press = PressSpec::parse("snapkv:budget=96,window=16");
  auto alone = [&](const Engine& e, int threads) {
    WorkspaceOptions wo;
    wo.n_threads = threads;
    Workspace ws(e, wo);
    auto seq = e.new_sequence({});
    return generate(e, *seq, p, {}, o, ws).tokens;
  };
  const auto ref = alone(*e1, 0);
  EXPECT_EQ(alone(*e3, 0), ref);  // thread count does not change results
  for (int round = 0; round < 2; ++round) {
    std::vector<int32_t> r1, r2, r3;
    std::thread t1([&] { r1 = alone(*e1, 0); });
    std::thread t2([&] { r2 = alone(*e3, 0); });
    std::thread t3([&] { r3 = alone(*e3, 2); });
    t1.join();
    t2.join();
    t3.join();
    EXPECT_EQ(r1, ref);
    EXPECT_EQ(r2, ref);
    EXPECT_EQ(r3, ref);
  }
  WorkspaceOptions wo;
  wo.n_threads = 3;
  EXPECT_EQ(Workspace(*e1, wo).n_threads(), 3);
  EXPECT_EQ(Workspace(*e3).n_threads(), 3);
  EXPECT_EQ(e1->n_threads(), 1);
  wo.n_threads = -1;
  EXPECT_THROW(Workspace(*e1, wo), Error);
  EngineOptions bad;
  bad.n_threads = -3;
  EXPECT_THROW(Engine::load((test::shared_dir() / "models" / "stories260K.gguf").string(), bad), Error);
}

}  // namespace
}  // namespace snapkv
