// End to end on SmolLM2-135M-Instruct (the demo's question-answering model): -m by name, a passkey
// answered through --chat with the full cache and with SnapKV, and issue 11's exact-copy case.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli_runner.h"

namespace snapkv::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

#define REQUIRE_SMOLLM2() \
  if (!fs::exists(smollm2_path())) GTEST_SKIP() << "SmolLM2 model missing: run scripts/get-model.sh smollm2"

fs::path temp_path(const std::string& name) {
  return fs::temp_directory_path() / ("snapkv_e2e_smol_" + std::to_string(::getpid()) + "_" + name);
}

// Sets an environment variable for the lifetime of the object (children started by run_cli see it).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { old_ ? ::setenv(name_, old_->c_str(), 1) : ::unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

json tokenize_json(const std::string& model, const std::string& text) {
  const auto r = run_cli({"tokenize", "-m", model, "-p", text, "--json"});
  EXPECT_EQ(r.rc, 0) << r.err;
  return r.rc == 0 ? json::parse(r.out) : json::object();
}

TEST(CliModelNames, SelectTheCachedModels) {
  REQUIRE_SMOLLM2();
  // Ids as llama.cpp gives them (tests/data/tokenizer/*_tokens.json, cases space_runs and
  // leading_space): SmolLM2 adds no BOS, Gemma adds <bos> = 2.
  EXPECT_EQ(tokenize_json("smollm2", "Hello world")["ids"], json::parse("[19556, 905]"));
  if (fs::exists(gemma_path())) {
    EXPECT_EQ(tokenize_json("gemma3", "Hello world")["ids"], json::parse("[2, 9259, 1902]"));
  }
  const auto r = run_cli({"inspect", "-m", "smollm2", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["hyperparameters"]["n_layer"], 30);
  EXPECT_EQ(j["hyperparameters"]["n_head_kv"], 3);
}

TEST(CliModelNames, MissingCachedModelSaysHowToFetchIt) {
  const fs::path empty = temp_path("empty_cache");
  fs::create_directories(empty);
  {
    ScopedEnv env("SNAPKV_MODELS", empty.string());
    for (const std::string name : {"smollm2", "gemma3"}) {
      const auto r = run_cli({"tokenize", "-m", name, "-p", "hi"});
      EXPECT_EQ(r.rc, 1);
      EXPECT_NE(r.err.find("scripts/get-model.sh " + name), std::string::npos) << r.err;
      EXPECT_NE(r.err.find(empty.string()), std::string::npos) << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    }
    // Neither a file nor a known name: the error lists the names.
    const auto r = run_cli({"run", "-m", "smollm3", "-p", "hi"});
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.err.find("'smollm3' does not exist"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("gemma3, smollm2"), std::string::npos) << r.err;
  }
  fs::remove_all(empty);
}

TEST(CliModelNames, AnExistingFileWinsOverAName) {
  const fs::path dir = temp_path("cwd");
  fs::create_directories(dir);
  std::ofstream(dir / "smollm2") << "not a gguf";
  const fs::path old = fs::current_path();
  fs::current_path(dir);
  const auto r = run_cli({"tokenize", "-m", "smollm2", "-p", "hi"});
  fs::current_path(old);
  EXPECT_EQ(r.rc, 1);
  // The file was opened (and rejected as GGUF, saying it hid the cached model), not the cached model.
  EXPECT_EQ(r.err.rfind("snapkv: error: -m smollm2: 'smollm2' in the working directory is not a GGUF file", 0), 0u)
      << r.err;
  fs::remove_all(dir);
}

constexpr const char* kPassKey = "71432";

// A passkey-retrieval prompt (Mohtashami & Jaggi 2023 style): filler, the key in the middle,
// filler, then the question: 3,562 SmolLM2 tokens, 3,592 in the chat prompt (SmolLM2's template: its default
// system turn, 21 tokens, then the user turn; 3.5x the budget below).
std::string passkey_prompt() {
  const std::string filler =
      "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back and again. ";
  std::string s = "There is important information hidden inside a lot of irrelevant text. Find it and memorize it.\n\n";
  for (int i = 0; i < 70; ++i) s += filler;
  s += std::string("The pass key is ") + kPassKey + ". Remember it. " + kPassKey + " is the pass key. ";
  for (int i = 0; i < 70; ++i) s += filler;
  return s + "\n\nThe text above contains a pass key. What is the pass key number?";
}

json run_json(std::vector<std::string> args) {
  args.insert(args.begin(), "run");
  for (const char* a : {"-m", "smollm2", "--chat", "-n", "16", "--temp", "0", "-t", "2", "--json"}) args.push_back(a);
  const auto r = run_cli(args);
  EXPECT_EQ(r.rc, 0) << r.err;
  return r.rc == 0 ? json::parse(r.out) : json::object();
}

// Measured (greedy, -n 16, C=1024): none, snapkv, pyramidkv and adakv answer "The pass key number is
// 71432." (12 tokens, then <|im_end|>). The others lose the middle of the prompt: streamingllm "The
// pass key number is 1.", h2o "The pass key number is 1234. It is a unique number", tova and
// random "The pass key number is 7.", knorm "The pass key number is 7143." (recorded, not asserted).
// Other keys at other depths of the same prompt: 40371 at 70% was answered by none and snapkv,
// 58196 at 30% not by snapkv ("58.").
TEST(CliSmolLM2, PasskeyAnsweredWithFullAndSnapKVCache) {
  REQUIRE_SMOLLM2();
  const fs::path prompt = temp_path("passkey.txt");
  std::ofstream(prompt, std::ios::binary) << passkey_prompt();
  const json none = run_json({"-f", prompt.string(), "--press", "none"});
  const json snap = run_json({"-f", prompt.string(), "--press", "snapkv", "--budget", "1024"});
  fs::remove(prompt);
  ASSERT_FALSE(none.empty());
  ASSERT_FALSE(snap.empty());
  EXPECT_EQ(none["arch"], "llama");
  EXPECT_EQ(none["n_prompt_tokens"], 3592);
  EXPECT_NE(none["text"].get<std::string>().find(kPassKey), std::string::npos) << none["text"];
  EXPECT_NE(snap["text"].get<std::string>().find(kPassKey), std::string::npos) << snap["text"];
  // The answer is one sentence ended by <|im_end|>, not a ramble to the -n limit.
  EXPECT_EQ(none["stop_reason"], "eos");
  EXPECT_EQ(snap["stop_reason"], "eos");
  // The first generated token comes from the uncompressed prefill.
  EXPECT_EQ(none["generated_token_ids"][0], snap["generated_token_ids"][0]);
  // Memory: 30 layers x 3 KV heads x (K+V) x 64 dims x 2 bytes (F16) = 23,040 bytes per token held.
  const size_t per_token = 30 * 3 * 2 * 64 * 2;
  // Held: the prompt (or the budget) plus every generated token, each fed back to produce the next
  // one, until <|im_end|> (not counted in n_generated_tokens and not fed).
  const size_t n_none = none["n_prompt_tokens"].get<size_t>() + none["n_generated_tokens"].get<size_t>();
  const size_t n_snap = 1024 + snap["n_generated_tokens"].get<size_t>();
  EXPECT_EQ(none["kv_cache_bytes"].get<size_t>(), n_none * per_token);
  EXPECT_EQ(snap["kv_cache_bytes"].get<size_t>(), n_snap * per_token);
  EXPECT_EQ(none["kv_cache_bytes_full"], snap["kv_cache_bytes_full"]);
  std::cout << "[smollm2 passkey] none: " << none["text"] << "\n[smollm2 passkey] snapkv C=1024: " << snap["text"]
            << std::endl;
}

// The same passkey with SnapKV on a quantized cache: q8_0 keys and q4_0 values (`--kv-type q8_0
// --kv-type-v q4_0`, 52 bytes per entry and head instead of f16's 256) still answer; the bytes are
// the kept entries x the mixed row sizes.
TEST(CliSmolLM2, PasskeyAnsweredWithSnapKVOnQ8KeysAndQ4Values) {
  REQUIRE_SMOLLM2();
  const fs::path prompt = temp_path("passkey_q.txt");
  std::ofstream(prompt, std::ios::binary) << passkey_prompt();
  const json j = run_json(
      {"-f", prompt.string(), "--press", "snapkv", "--budget", "1024", "--kv-type", "q8_0", "--kv-type-v", "q4_0"});
  fs::remove(prompt);
  ASSERT_FALSE(j.empty());
  EXPECT_EQ(j["kv_type"], "q8_0");
  EXPECT_EQ(j["kv_type_v"], "q4_0");
  EXPECT_NE(j["text"].get<std::string>().find(kPassKey), std::string::npos) << j["text"];
  // 30 layers x 3 KV heads x (K row 2 x 34 + V row 2 x 18 bytes) per token held.
  const size_t per_token = 30 * 3 * (68 + 36);
  EXPECT_EQ(j["kv_cache_bytes"].get<size_t>(), (1024 + j["n_generated_tokens"].get<size_t>()) * per_token);
  EXPECT_EQ(j["kv_cache_bytes_full"].get<size_t>(),
            (j["n_prompt_tokens"].get<size_t>() + j["n_generated_tokens"].get<size_t>()) * per_token);
  std::cout << "[smollm2 passkey] snapkv C=1024, q8_0 keys / q4_0 values: " << j["text"] << std::endl;
}

// Issue 11's case: RULER's noise haystack (x190) with one 7-digit number at depth 10 / 50 / 90 %, the
// question after it in the same user turn (4,625 chat tokens). Measured (greedy, this test's commands):
// plain snapkv at ratio 0.5 answers "73" / "73" / "736476" (digits evicted from the middle of the
// number; not asserted, the method's weakness), with window=question all three exactly, at 0.5 and
// at 0.9 (window 22 = the question plus the template's closing tokens, not 32 with 10 haystack
// tokens voting). docs/quality.md, "Exact copies".
constexpr const char* kMagicNumber = "7364819";

std::string cobalt_document(int depth_percent) {
  const std::string noise =
      "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. ";
  const int before = 190 * depth_percent / 100;
  std::string s;
  for (int i = 0; i < before; ++i) s += noise;
  s += std::string("One of the special magic numbers for cobalt is: ") + kMagicNumber + ". ";
  for (int i = before; i < 190; ++i) s += noise;
  return s;
}

TEST(CliSmolLM2, QuestionWindowCopiesTheNumberExactly) {
  REQUIRE_SMOLLM2();
  const std::string question = "What is the special magic number for cobalt mentioned in the provided text?";
  // Ratio 0.9 at every depth (the hard case), 0.5 where plain snapkv answers "73".
  const std::vector<std::pair<int, std::string>> cases = {{10, "0.9"}, {50, "0.9"}, {90, "0.9"}, {50, "0.5"}};
  for (const auto& [depth, ratio] : cases) {
    const fs::path doc = temp_path("cobalt" + std::to_string(depth) + ".txt");
    std::ofstream(doc, std::ios::binary) << cobalt_document(depth);
    const auto r = run_cli({"run", "-m", "smollm2", "--chat", "-f", doc.string(), "-p", question, "-n", "22", "--temp",
                            "0", "-t", "2", "--json", "--press", "snapkv:ratio=" + ratio + ",window=question"});
    fs::remove(doc);
    ASSERT_EQ(r.rc, 0) << r.err;
    const json j = json::parse(r.out);
    EXPECT_EQ(j["n_prompt_tokens"], 4625);
    EXPECT_EQ(j["window"], "question");
    EXPECT_EQ(j["window_used"], 22);
    EXPECT_EQ(j["compression_ratio"], std::stod(ratio));
    const std::string text = j["text"].get<std::string>();
    // The number, whole: the answer sentence is "... in the provided text is 7364819."
    EXPECT_NE(text.find(std::string(" is ") + kMagicNumber), std::string::npos)
        << "depth " << depth << "%, ratio " << ratio << ": " << text;
    std::cout << "[smollm2 cobalt] depth " << depth << "%, ratio " << ratio << ", window=question: " << j["text"]
              << std::endl;
  }
}

}  // namespace
}  // namespace snapkv::test
