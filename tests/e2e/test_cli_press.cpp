// End to end: prompt KV-cache compression through `snapkv run` on the Gemma model.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_runner.h"

namespace snapkv::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

#define REQUIRE_GEMMA() \
  if (!fs::exists(gemma_path())) GTEST_SKIP() << "Gemma model missing: run scripts/get-model.sh"

constexpr const char* kPassKey = "68431";

// A passkey-retrieval prompt (Mohtashami & Jaggi 2023 style): filler, the key in the middle,
// filler, then the question. About 3,000 Gemma tokens.
std::string passkey_prompt() {
  const std::string filler =
      "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. ";
  std::string s = "There is an important info hidden inside a lot of irrelevant text. Find it and memorize it. ";
  for (int i = 0; i < 70; ++i) s += filler;
  s += std::string("The pass key is ") + kPassKey + ". Remember it. " + kPassKey + " is the pass key. ";
  for (int i = 0; i < 70; ++i) s += filler;
  return s;
}

const std::string kQuestion = "What is the pass key? The pass key is";

fs::path write_temp(const std::string& name, const std::string& text) {
  const fs::path p = fs::temp_directory_path() / name;
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

json run_json(std::vector<std::string> args) {
  args.insert(args.begin(), "run");
  for (const char* a : {"--temp", "0", "-t", "2", "--json"}) args.push_back(a);
  const auto r = run_cli(args);
  EXPECT_EQ(r.rc, 0) << r.err;
  if (r.rc != 0) return json::object();
  return json::parse(r.out);
}

TEST(CliPress, PasskeyRetrievedWithFullAndSnapKVCache) {
  REQUIRE_GEMMA();
  const fs::path prompt = write_temp("snapkv_passkey.txt", passkey_prompt() + kQuestion);
  const json none = run_json({"-f", prompt.string(), "-n", "8", "--press", "none"});
  const json snap = run_json({"-f", prompt.string(), "-n", "8", "--press", "snapkv", "--budget", "256"});
  const json stream = run_json({"-f", prompt.string(), "-n", "8", "--press", "streamingllm", "--budget", "256"});
  ASSERT_FALSE(none.empty());
  ASSERT_FALSE(snap.empty());
  ASSERT_FALSE(stream.empty());
  EXPECT_GT(none["n_prompt_tokens"].get<int>(), 2500);
  EXPECT_LT(none["n_prompt_tokens"].get<int>(), 3500);
  EXPECT_NE(none["text"].get<std::string>().find(kPassKey), std::string::npos) << none["text"];
  EXPECT_NE(snap["text"].get<std::string>().find(kPassKey), std::string::npos) << snap["text"];
  // The first generated token comes from the uncompressed prefill.
  EXPECT_EQ(none["generated_token_ids"][0], snap["generated_token_ids"][0]);
  // Memory: the compressed cache holds less than the full one; the full-cache figure is press-independent.
  EXPECT_EQ(none["kv_cache_bytes_full"], snap["kv_cache_bytes_full"]);
  EXPECT_LT(snap["kv_cache_bytes"].get<size_t>(), none["kv_cache_bytes"].get<size_t>());
  EXPECT_LT(snap["peak_kv_cache_bytes"].get<size_t>(), none["peak_kv_cache_bytes"].get<size_t>());
  EXPECT_EQ(snap["budget"], 256);
  // Recorded, not asserted: what StreamingLLM (sinks + recent window) answers without the middle.
  std::cout << "[passkey] none: " << none["text"] << "\n[passkey] snapkv C=256: " << snap["text"]
            << "\n[passkey] streamingllm C=256: " << stream["text"] << std::endl;
  RecordProperty("streamingllm_answer", stream["text"].get<std::string>());
  fs::remove(prompt);
}

TEST(CliPress, QuestionAfterCompressionAndDumpKept) {
  REQUIRE_GEMMA();
  const fs::path ctx = write_temp("snapkv_passkey_ctx.txt", passkey_prompt());
  const fs::path dump = fs::temp_directory_path() / "snapkv_dump_kept.json";
  const json r = run_json({"-f", ctx.string(), "--question", kQuestion, "-n", "8", "--press", "snapkv", "--budget",
                           "256", "--dump-kept", dump.string()});
  ASSERT_FALSE(r.empty());
  std::cout << "[passkey, question after compression] snapkv C=256: " << r["text"] << std::endl;
  const int n_ctx_tokens = r["n_context_tokens"].get<int>();
  EXPECT_GT(r["n_question_tokens"].get<int>(), 0);

  std::ifstream in(dump);
  const json d = json::parse(in);
  ASSERT_EQ(d["layers"].size(), 3u);  // Gemma 3 270M: layers 5, 11, 17 use full attention
  std::vector<int> layers;
  for (const auto& l : d["layers"]) {
    layers.push_back(l["layer"].get<int>());
    ASSERT_EQ(l["heads"].size(), 1u);  // MQA
    const auto pos = l["heads"][0]["positions"].get<std::vector<int>>();
    ASSERT_EQ(pos.size(), 256u);
    for (size_t i = 1; i < pos.size(); ++i) ASSERT_LT(pos[i - 1], pos[i]);
    // The observation window (the last 32 context positions) is always kept.
    for (int i = 0; i < 32; ++i) EXPECT_EQ(pos[pos.size() - 32 + i], n_ctx_tokens - 32 + i);
    EXPECT_LT(pos.back(), n_ctx_tokens);
  }
  EXPECT_EQ(layers, (std::vector<int>{5, 11, 17}));
  fs::remove(ctx);
  fs::remove(dump);
}

TEST(CliPress, BudgetAbovePromptIsIdenticalToNone) {
  // stories260K (GQA 8/4): the CLI path of every press with C >= L must change nothing.
  // (Bit-identical logits are asserted at the engine level in tests/compression.)
  const std::string stories = (shared_dir() / "models" / "stories260K.gguf").string();
  std::string p = "Once upon a time, there was a little girl named Lily.";
  for (int i = 0; i < 6; ++i) p += " She loved to play outside in the park with her friends.";
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"-m", stories, "-p", p, "-n", "24", "--ignore-eos"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_json(args);
  };
  const json none = run({"--press", "none"});
  ASSERT_FALSE(none.empty());
  for (const char* press : {"snapkv", "pyramidkv", "adakv", "streamingllm", "h2o", "tova", "knorm", "random"}) {
    const json c = run({"--press", press, "--budget", "100000"});
    EXPECT_EQ(c["generated_token_ids"], none["generated_token_ids"]) << press;
    EXPECT_EQ(c["kv_cache_bytes"], none["kv_cache_bytes"]) << press;
  }
  // And a real compression on the same prompt changes the held bytes but not the first token.
  const json snap = run({"--press", "snapkv", "--budget", "48", "--window", "16"});
  EXPECT_EQ(snap["generated_token_ids"][0], none["generated_token_ids"][0]);
  EXPECT_LT(snap["kv_cache_bytes"].get<size_t>(), none["kv_cache_bytes"].get<size_t>());
}

TEST(CliPress, BadValuesGiveClearErrors) {
  const std::string stories = (shared_dir() / "models" / "stories260K.gguf").string();
  const std::string p = "Once upon a time there was a little girl named Lily who loved to play outside.";
  struct Case {
    std::vector<std::string> args;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {{"--press", "snapkv", "--budget", "16", "--window", "32"}, "budget"},
      {{"--press", "nosuchpress"}, "snapkv"},
      {{"--press", "snapkv", "--compression-ratio", "1.0"}, "ratio"},
      {{"--press", "snapkv", "--compression-ratio", "-0.5"}, "ratio"},
      {{"--press", "snapkv", "--compression-ratio", "0.9"}, "window"},  // C = 2 < W = 32 on a ~20-token prompt
      {{"--press", "snapkv", "--budget", "64", "--compression-ratio", "0.5"}, "excludes"},
      {{"--press", "snapkv", "--kernel", "4"}, "kernel"},
      {{"--press", "streamingllm", "--budget", "34", "--sinks", "4", "--window", "32"}, "sinks"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {"run", "-m", stories, "-p", p, "-n", "4"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const auto r = run_cli(args);
    EXPECT_NE(r.rc, 0) << c.needle;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << "stderr: " << r.err;
  }
}

// --press also takes a whole spec (what the server and the evaluation harness pass): the same
// selection as the flags, allocators over any scorer, strict errors, short prompts kept whole.
TEST(CliPress, PressSpecsEqualFlagsAndReachEveryAllocator) {
  const std::string stories = (shared_dir() / "models" / "stories260K.gguf").string();
  std::string p = "Once upon a time, there was a little girl named Lily.";
  for (int i = 0; i < 12; ++i) p += " She loved to play outside in the park with her friends.";
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"-m", stories, "-p", p, "-n", "16", "--ignore-eos"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_json(args);
  };
  const json flags = run({"--press", "snapkv", "--budget", "48", "--window", "16", "--pool", "avg"});
  const json spec = run({"--press", "snapkv:budget=48,window=16,pool=avg"});
  ASSERT_FALSE(flags.empty());
  ASSERT_FALSE(spec.empty());
  EXPECT_EQ(spec["generated_token_ids"], flags["generated_token_ids"]);
  EXPECT_EQ(spec["kv_cache_bytes"], flags["kv_cache_bytes"]);
  EXPECT_EQ(spec["press_spec"], flags["press_spec"]);
  EXPECT_EQ(spec["window"], 16);
  EXPECT_EQ(spec["pool"], "avg");
  // AdaKV's allocation over K-norm scores: heads get different budgets, the layer total is fixed.
  const json ada = run({"--press", "knorm:alloc=ada,budget=48,window=16"});
  ASSERT_FALSE(ada.empty());
  EXPECT_TRUE(ada["compressed"].get<bool>());
  EXPECT_EQ(ada["kv_cache_bytes"], flags["kv_cache_bytes"]);  // same totals as uniform snapkv
  EXPECT_EQ(ada["kernel"], nullptr);                          // knorm has no pooling kernel
  // A prompt not longer than window + sinks is kept whole and says so (with the flags, a ratio on
  // such a prompt is an error, as before).
  const json whole = run_json({"-m", stories, "-p", "Once upon a time", "-n", "4", "--press", "snapkv:ratio=0.5"});
  ASSERT_FALSE(whole.empty());
  EXPECT_FALSE(whole["compressed"].get<bool>());
  EXPECT_NE(whole["compression_note"].get<std::string>().find("window"), std::string::npos);
  EXPECT_EQ(whole["kv_cache_bytes"], whole["kv_cache_bytes_full"]);
  // Errors name what is wrong.
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--press", "snapkv:budget=48", "--window", "8"}, "not both"},
      {{"--press", "snapkv:kernel=4"}, "kernel"},
      {{"--press", "knorm:pool=max"}, "pool"},
      {{"--press", "snapkv:budget"}, "budget"},
      {{"--press", "nosuch:budget=3"}, "nosuch"},
  };
  for (const auto& [args, needle] : bad) {
    std::vector<std::string> a = {"run", "-m", stories, "-p", p, "-n", "2"};
    a.insert(a.end(), args.begin(), args.end());
    const auto r = run_cli(a);
    EXPECT_NE(r.rc, 0) << needle;
    EXPECT_NE(r.err.find(needle), std::string::npos) << "stderr: " << r.err;
  }
}

// Issue 11 on the CLI: -f DOC -p QUESTION makes the question the prompt's question span, which
// window=question uses as its observation window (equal to the fixed window of that size);
// --span-gap equals the spec key.
TEST(CliPress, QuestionWindowAndSpanGap) {
  const std::string stories = (shared_dir() / "models" / "stories260K.gguf").string();
  std::string text;
  for (int i = 0; i < 30; ++i) text += "Once upon a time there was a little girl who liked to play in the park. ";
  const fs::path doc = write_temp("snapkv_doc.txt", text);
  const std::string q = "Where did the girl like to play?";
  const std::vector<std::string> base = {"-m", stories, "-f", doc.string(), "-p", q, "-n", "6"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return run_json(a);
  };
  const json qw = with({"--press", "snapkv:budget=96,window=question,window_min=4"});
  ASSERT_FALSE(qw.empty());
  const int span = qw["n_question_span_tokens"].get<int>();
  EXPECT_GT(span, 4);
  EXPECT_LT(span, 64);
  EXPECT_EQ(qw["window_used"], span);
  EXPECT_EQ(qw["window"], "question");
  const json fixed = with({"--press", "snapkv:budget=96,window=" + std::to_string(span)});
  ASSERT_FALSE(fixed.empty());
  EXPECT_EQ(fixed["window_used"], span);
  EXPECT_EQ(qw["generated_token_ids"], fixed["generated_token_ids"]);
  EXPECT_EQ(qw["kv_cache_bytes"], fixed["kv_cache_bytes"]);
  EXPECT_EQ(qw["n_prompt_tokens"], fixed["n_prompt_tokens"]);

  const json flag = with({"--press", "snapkv", "--budget", "64", "--span-gap", "3"});
  const json spec = with({"--press", "snapkv:budget=64,span_gap=3"});
  ASSERT_FALSE(flag.empty());
  ASSERT_FALSE(spec.empty());
  EXPECT_EQ(flag["press_spec"], spec["press_spec"]);
  EXPECT_EQ(flag["generated_token_ids"], spec["generated_token_ids"]);
  EXPECT_EQ(flag["kv_cache_bytes"], spec["kv_cache_bytes"]);
  EXPECT_NE(spec["press_spec"].get<std::string>().find("span_gap=3"), std::string::npos);
  const auto bad = run_cli({"run", "-m", stories, "-p", "hi", "--press", "snapkv", "--span-gap", "-1"});
  EXPECT_NE(bad.rc, 0);
  EXPECT_NE(bad.err.find("--span-gap"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace snapkv::test
