// End to end: `snapkv run/inspect/tokenize` on real models, and clear errors for bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "snapkv/prefill_attention.h"

namespace snapkv::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

#define REQUIRE_GEMMA() \
  if (!fs::exists(gemma_path())) GTEST_SKIP() << "Gemma model missing: run scripts/get-model.sh"

std::string stories() { return (shared_dir() / "models" / "stories260K.gguf").string(); }

// The prompt named `name` in the stories260K golden data recorded with llama.cpp.
json golden_prompt(const std::string& kv, const std::string& name) {
  std::ifstream in(shared_dir() / "models" / "golden" / "stories260K" / kv / "golden.json");
  const json g = json::parse(in);
  for (const auto& p : g["prompts"]) {
    if (p["name"] == name) return p;
  }
  ADD_FAILURE() << "no golden prompt " << name;
  return json::object();
}

TEST(CliRun, GreedyJsonReportOnStoriesMatchesLlamaCpp) {
  const json p = golden_prompt("kv_f16", "once_upon");
  const auto r = run_cli({"run", "-m", stories(), "-p", p["text"].get<std::string>(), "-n", "20", "--temp", "0",
                          "--ignore-eos", "-t", "1", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const json j = json::parse(r.out);
  for (const char* k : {"model", "arch", "n_prompt_tokens", "n_generated_tokens", "generated_token_ids", "text",
                        "ttft_ms", "prefill_ms", "prefill_tokens_per_s", "decode_ms", "decode_tokens_per_s",
                        "kv_cache_bytes", "peak_rss_bytes", "threads", "kv_type", "prefill_attention"}) {
    EXPECT_TRUE(j.contains(k)) << "missing key " << k;
  }
  EXPECT_EQ(j["arch"], "llama");
  EXPECT_EQ(j["n_prompt_tokens"].get<size_t>(), p["token_ids"].size());
  EXPECT_EQ(j["n_generated_tokens"], 20);
  const auto ids = j["generated_token_ids"].get<std::vector<int>>();
  const auto want = p["greedy_token_ids"].get<std::vector<int>>();
  ASSERT_EQ(ids.size(), 20u);
  // once_upon's smallest top-2 gap on the golden path is 0.134: the tokens must agree exactly.
  EXPECT_EQ(ids, std::vector<int>(want.begin(), want.begin() + 20));
  // stories260K: 5 layers x 4 KV heads x 8 dims x 2 (K,V) x 2 bytes per token, 5 + 19 tokens held.
  EXPECT_EQ(j["kv_cache_bytes"].get<size_t>(), size_t{5 * 4 * 8 * 2 * 2} * (5 + 19));
  EXPECT_EQ(j["kv_type"], "f16");
  EXPECT_EQ(j["prefill_attention"], "exact");
  EXPECT_EQ(j["threads"], 1);
  EXPECT_GT(j["peak_rss_bytes"].get<size_t>(), 0u);
}

// --profile: the per-operation table on stderr and, with --json, the same numbers as "profile"
// (decode steps = generated tokens - 1: the first token comes from the prefill's logits).
TEST(CliRun, ProfileReportsEveryOperation) {
  const json p = golden_prompt("kv_f16", "once_upon");
  const auto r = run_cli({"run", "-m", stories(), "-p", p["text"].get<std::string>(), "-n", "8", "--temp", "0",
                          "--ignore-eos", "-t", "1", "--json", "--profile"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_TRUE(j.contains("profile"));
  const json& dec = j["profile"]["decode"];
  EXPECT_EQ(dec["steps"], 7);
  EXPECT_GT(dec["seconds"].get<double>(), 0.0);
  EXPECT_EQ(dec["ops"]["qkv"]["calls"], 7 * 5);  // 5 layers
  EXPECT_EQ(dec["ops"]["logits"]["calls"], 7);
  EXPECT_GT(dec["ops"]["attention"]["bytes"].get<double>(), 0.0);
  EXPECT_EQ(j["profile"]["prefill"]["steps"], 1);
  EXPECT_NE(r.err.find("| attention |"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("decode: 7 steps"), std::string::npos) << r.err;
  // Without --profile: neither.
  const auto plain = run_cli({"run", "-m", stories(), "-p", p["text"].get<std::string>(), "-n", "8", "--temp", "0",
                              "--ignore-eos", "-t", "1", "--json"});
  ASSERT_EQ(plain.rc, 0) << plain.err;
  EXPECT_FALSE(json::parse(plain.out).contains("profile"));
  EXPECT_EQ(plain.err.find("| attention |"), std::string::npos);
  EXPECT_EQ(json::parse(plain.out)["generated_token_ids"], j["generated_token_ids"]);
}

// --prefill-attn bf16: where the build runs it, the JSON reports it and stories260K (head_dim 8,
// which the BF16 kernel leaves to the exact one) generates the exact run's tokens; elsewhere the
// engine's one-line error, exit 1 like other unusable settings.
TEST(CliRun, PrefillAttnBf16RunsOrGivesTheEnginesError) {
  const std::vector<std::string> args{"run", "-m",     stories(), "-p",    "Once upon a time", "-n", "8", "-t",
                                      "1",   "--temp", "0",       "--json"};
  auto with = [&](const char* a) {
    auto v = args;
    v.insert(v.end(), {"--prefill-attn", a});
    return v;
  };
  const auto exact = run_cli(with("exact"));
  ASSERT_EQ(exact.rc, 0) << exact.err;
  EXPECT_EQ(json::parse(exact.out)["prefill_attention"], "exact");
  EXPECT_EQ(json::parse(exact.out)["prefill_attention_isa"], "f32");
  const auto r = run_cli(with("bf16"));
  if (prefill_attention_supported(PrefillAttention::BF16)) {
    ASSERT_EQ(r.rc, 0) << r.err;
    const json j = json::parse(r.out);
    EXPECT_EQ(j["prefill_attention"], "bf16");
    // The same machine and environment as this test: AMX tiles where usable, else vectors.
    // stories260K: head_dim 8, so the exact kernel runs (f32) whatever the CPU has.
    EXPECT_EQ(j["prefill_attention_isa"], "f32");
    EXPECT_EQ(j["generated_token_ids"], json::parse(exact.out)["generated_token_ids"]);
  } else {
    EXPECT_EQ(r.rc, 1) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find("prefill attention 'bf16'"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("AVX512-BF16"), std::string::npos) << r.err;
  }
}

// --prefill-attn int8 on an AVX2 build: the JSON reports it; stories260K (head_dim 8) runs the
// exact kernel, so the tokens are the exact run's.
TEST(CliRun, PrefillAttnInt8Runs) {
  if (!prefill_attention_supported(PrefillAttention::Int8)) GTEST_SKIP() << "this build has no AVX2";
  const std::vector<std::string> base{"run", "-m",     stories(), "-p",    "Once upon a time", "-n", "8", "-t",
                                      "1",   "--temp", "0",       "--json"};
  auto exact_args = base, int8_args = base;
  int8_args.insert(int8_args.end(), {"--prefill-attn", "int8"});
  const auto exact = run_cli(exact_args);
  const auto r = run_cli(int8_args);
  ASSERT_EQ(exact.rc, 0) << exact.err;
  ASSERT_EQ(r.rc, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["prefill_attention"], "int8");
  EXPECT_EQ(j["prefill_attention_isa"], "f32");
  EXPECT_EQ(j["generated_token_ids"], json::parse(exact.out)["generated_token_ids"]);
}

TEST(CliRun, StreamsTextWithoutJson) {
  const auto r = run_cli({"run", "-m", stories(), "-p", "Once upon a time", "-n", "12", "--temp", "0"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("there was a little girl"), std::string::npos) << r.out;
}

TEST(CliRun, VersionIsTheProjectVersion) {
  const auto r = run_cli({"--version"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, std::string("snapkv ") + SNAPKV_PROJECT_VERSION + "\n");
}

TEST(CliRun, GemmaChatMatchesLlamaCppTokensAndGreedyPath) {
  REQUIRE_GEMMA();
  // Golden data recorded from llama.cpp (tools/make_gemma_golden.py): the same question in
  // Gemma's turn format, tokenized with special tokens parsed.
  std::ifstream in(source_dir() / "tests" / "data" / "gemma3-270m" / "kv_f16" / "golden.json");
  const json g = json::parse(in);
  json p;
  for (const auto& q : g["prompts"]) {
    if (q["name"] == "chat_boiling") p = q;
  }
  ASSERT_FALSE(p.is_null());
  const auto r = run_cli({"run", "-p", "What is the boiling point of water in Celsius?", "--chat", "-n", "8", "--temp",
                          "0", "--ignore-eos", "-t", "2", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["arch"], "gemma3");
  EXPECT_EQ(j["n_prompt_tokens"].get<size_t>(), p["token_ids"].size());
  const auto ids = j["generated_token_ids"].get<std::vector<int>>();
  const auto& steps = p["greedy"]["steps"];
  const auto want = p["greedy"]["token_ids"].get<std::vector<int>>();
  ASSERT_EQ(ids.size(), 8u);
  for (size_t i = 0; i < ids.size(); ++i) {
    // Compare while llama.cpp's own top-2 gap is well above our logit error.
    if (steps[i]["gap"].get<double>() < 0.1) break;
    EXPECT_EQ(ids[i], want[i]) << "step " << i;
  }
  EXPECT_GT(j["decode_tokens_per_s"].get<double>(), 0.0);
  EXPECT_GT(j["kv_cache_bytes"].get<size_t>(), 0u);
  EXPECT_EQ(j["kv_cache_bytes"], j["kv_cache_bytes_full"]);  // --press none
}

TEST(CliErrors, OneClearLineAndNonZeroExit) {
  struct Case {
    std::vector<std::string> args;
    std::string needle;
  };
  const fs::path tmp = fs::temp_directory_path() / "snapkv_e2e_bad.gguf";
  { std::ofstream(tmp) << "this is not a gguf file at all"; }
  const std::vector<Case> cases = {
      {{"run", "-m", "/nonexistent/model.gguf", "-p", "hi"}, "/nonexistent/model.gguf"},
      {{"run", "-m", tmp.string(), "-p", "hi"}, "snapkv_e2e_bad.gguf"},
      {{"run", "-m", stories(), "-p", "hi", "-f", "/nonexistent/prompt.txt"}, "/nonexistent/prompt.txt"},
      {{"run", "-m", stories(), "-f", "/nonexistent/prompt.txt"}, "/nonexistent/prompt.txt"},
      {{"run", "-m", stories(), "-p", "Once upon a time there was a girl", "-c", "4"}, "does not fit"},
      {{"run", "-m", stories(), "-p", "hi", "--kv-type", "q4"}, "--kv-type"},
      {{"run", "-m", stories(), "-p", "hi", "--temp", "-1"}, "--temp"},
      {{"run", "-m", stories(), "-p", "hi", "-n", "abc"}, "-n"},
      {{"run", "-m", stories(), "-p", "hi", "--chat"}, "chat template"},
      {{"inspect", "-m", "/nonexistent/x.gguf"}, "/nonexistent/x.gguf"},
  };
  for (const auto& c : cases) {
    const auto r = run_cli(c.args);
    EXPECT_NE(r.rc, 0) << c.args[0] << " " << c.needle;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << "stderr: " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "stderr: " << r.err;
  }
  fs::remove(tmp);
}

TEST(CliInspect, ReportsArchitectureAndTensors) {
  const auto r = run_cli({"inspect", "-m", stories(), "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["hyperparameters"]["arch"], "llama");
  EXPECT_EQ(j["hyperparameters"]["n_layer"], 5);
  EXPECT_EQ(j["hyperparameters"]["n_head_kv"], 4);
  EXPECT_EQ(j["tensors"].size(), 48u);
  EXPECT_EQ(j["types"]["F32"]["tensors"], 48);
}

TEST(CliTokenize, MatchesGoldenIds) {
  const json p = golden_prompt("kv_f32", "lily_ball");
  const auto r = run_cli({"tokenize", "-m", stories(), "-p", p["text"].get<std::string>(), "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["ids"], p["token_ids"]);
}

// -f FILE tokenizes the file's bytes exactly as -p does the same text (golden ids from llama.cpp;
// a multi-line text with UTF-8; an empty text is BOS alone either way).
TEST(CliTokenize, FileGivesTheSameIdsAsPrompt) {
  const fs::path tmp = fs::temp_directory_path() / ("snapkv_e2e_tok_" + std::to_string(::getpid()) + ".txt");
  auto ids_of = [](const std::vector<std::string>& args) {
    const auto r = run_cli(args);
    EXPECT_EQ(r.rc, 0) << r.err;
    const json j = r.rc == 0 ? json::parse(r.out) : json::object();
    if (j.empty()) return json();
    EXPECT_EQ(j["n_tokens"], j["ids"].size());
    return j["ids"];
  };
  const json golden = golden_prompt("kv_f32", "lily_ball");
  const std::string multi = "Once upon a time,\nthere was a girl.\n\n  She said \"h\u00e9llo\" \xe2\x9c\x93 twice.\n";
  for (const std::string& text : {golden["text"].get<std::string>(), multi, std::string()}) {
    std::ofstream(tmp, std::ios::binary) << text;
    const json from_file = ids_of({"tokenize", "-m", stories(), "-f", tmp.string(), "--json"});
    const json from_arg = ids_of({"tokenize", "-m", stories(), "-p", text, "--json"});
    ASSERT_TRUE(from_file.is_array()) << text;
    EXPECT_EQ(from_file, from_arg) << text;
    if (text.empty()) {
      EXPECT_EQ(from_file, json::array({1})) << "BOS only";
    }
  }
  std::ofstream(tmp, std::ios::binary) << golden["text"].get<std::string>();
  EXPECT_EQ(ids_of({"tokenize", "-m", stories(), "--file", tmp.string(), "--json"}), golden["token_ids"]);
  // The plain listing ends with the same count.
  const auto plain = run_cli({"tokenize", "-m", stories(), "-f", tmp.string()});
  ASSERT_EQ(plain.rc, 0) << plain.err;
  EXPECT_NE(plain.out.find("\n" + std::to_string(golden["token_ids"].size()) + " tokens\n"), std::string::npos)
      << plain.out;
  fs::remove(tmp);
}

}  // namespace
}  // namespace snapkv::test
