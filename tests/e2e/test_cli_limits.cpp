// End to end: how `snapkv run` ends (EOS, -n, full context), what it prints when the model emits
// bytes that are not UTF-8, and how it behaves when its stdout goes away. Fast: stories260K and
// a tiny synthetic model written here.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "support/synthetic_model.h"

namespace snapkv::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string stories() { return (shared_dir() / "models" / "stories260K.gguf").string(); }

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// True if `s` is well-formed UTF-8 (RFC 3629).
bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    unsigned lo = 0x80, hi = 0xBF;
    if (c < 0x80) {
      n = 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
      n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    } else {
      return false;
    }
    if (i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return false;
    }
    i += n;
  }
  return true;
}

// A 1-layer Llama with random weights and a 260-token vocabulary (3 specials, 256 byte tokens,
// one word): near-uniform logits, so sampling at temperature 1 emits EOS (id 2) about once every
// 260 tokens and mostly bytes that do not form UTF-8.
class CliTinyModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = fs::temp_directory_path() / ("snapkv_e2e_tiny_" + std::to_string(::getpid()) + ".gguf");
    SyntheticModelConfig c;
    c.n_layer = 1;
    c.n_head = 2;
    c.n_head_kv = 1;
    c.head_dim = 16;
    c.n_embd = 32;
    c.n_ff = 32;
    c.n_vocab = 260;
    c.n_ctx = 4096;
    c.name = "tiny e2e model";
    write_synthetic_model(c, path_.string());
  }
  static void TearDownTestSuite() { fs::remove(path_); }

  static json run_json(std::vector<std::string> extra) {
    std::vector<std::string> a{"run",     "-m", path_.string(), "-p", "hi", "--temp", "1",
                               "--top-k", "0",  "--top-p",      "1",  "-t", "1",      "--json"};
    a.insert(a.end(), extra.begin(), extra.end());
    const auto r = run_cli(a);
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_TRUE(valid_utf8(r.out));
    return r.rc == 0 ? json::parse(r.out) : json::object();
  }

  static fs::path path_;
};

fs::path CliTinyModel::path_;

TEST_F(CliTinyModel, StopsAtEosUnlessIgnoreEos) {
  const json all = run_json({"-n", "3000", "--seed", "11", "--ignore-eos"});
  ASSERT_FALSE(all.empty());
  const auto ids = all["generated_token_ids"].get<std::vector<int>>();
  ASSERT_EQ(ids.size(), 3000u);
  EXPECT_EQ(all["stop_reason"], "n_predict");
  const auto eos = std::find(ids.begin(), ids.end(), 2);
  ASSERT_NE(eos, ids.end()) << "no EOS in 3000 near-uniform draws over 260 tokens (p < 1e-4)";
  const auto n_before = static_cast<size_t>(eos - ids.begin());

  // Same seed without --ignore-eos: the same tokens up to the EOS, which is not emitted.
  const json stopped = run_json({"-n", "3000", "--seed", "11"});
  ASSERT_FALSE(stopped.empty());
  EXPECT_EQ(stopped["stop_reason"], "eos");
  EXPECT_EQ(stopped["generated_token_ids"].get<std::vector<int>>(), std::vector<int>(ids.begin(), eos));
  EXPECT_EQ(stopped["n_generated_tokens"].get<size_t>(), n_before);
}

TEST_F(CliTinyModel, JsonAndStreamedTextAreValidUtf8WhenTheModelEmitsRawBytes) {
  const json j = run_json({"-n", "200", "--seed", "3", "--ignore-eos"});
  ASSERT_FALSE(j.empty());
  const auto ids = j["generated_token_ids"].get<std::vector<int>>();
  // Byte tokens (ids 3..258) dominate; random bytes are almost never valid UTF-8.
  EXPECT_GT(std::count_if(ids.begin(), ids.end(), [](int id) { return id >= 3 && id <= 258; }), 150);
  const std::string text = j["text"].get<std::string>();
  EXPECT_TRUE(valid_utf8(text));
  EXPECT_NE(text.find("\xef\xbf\xbd"), std::string::npos) << "expected U+FFFD for the invalid bytes";

  const auto r = run_cli({"run", "-m", path_.string(), "-p", "hi", "--temp", "1", "--top-k", "0", "--top-p", "1",
                          "--seed", "3", "-n", "200", "--ignore-eos", "-t", "1"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(valid_utf8(r.out));
  EXPECT_TRUE(r.out == text + "\n") << "the streamed text differs from the JSON text";
}

TEST(CliLimits, ContextFullStopsWithOneNote) {
  // "Once upon a time" is 5 tokens with BOS; -c 8 leaves room for 3 decoded positions, so the
  // 4th sampled token is the last one printed.
  const auto r =
      run_cli({"run", "-m", stories(), "-p", "Once upon a time", "-n", "50", "--temp", "0", "-c", "8", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["n_prompt_tokens"], 5);
  EXPECT_EQ(j["n_generated_tokens"], 4);
  EXPECT_EQ(j["stop_reason"], "context_full");
  EXPECT_EQ(r.err, "snapkv: context of 8 tokens is full; generation stopped after 4 tokens (-c)\n");

  const auto t = run_cli({"run", "-m", stories(), "-p", "Once upon a time", "-n", "50", "--temp", "0", "-c", "8"});
  ASSERT_EQ(t.rc, 0) << t.err;
  EXPECT_EQ(t.out, j["text"].get<std::string>() + "\n");
  EXPECT_EQ(t.err, r.err);

  // -n reached first: no note.
  const auto n =
      run_cli({"run", "-m", stories(), "-p", "Once upon a time", "-n", "4", "--temp", "0", "-c", "8", "--json"});
  ASSERT_EQ(n.rc, 0) << n.err;
  EXPECT_EQ(n.err, "");
  EXPECT_EQ(json::parse(n.out)["stop_reason"], "n_predict");
}

TEST(CliLimits, ZeroTokensAndContextBeyondTraining) {
  const auto r = run_cli({"run", "-m", stories(), "-p", "Once upon a time", "-n", "0", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["n_generated_tokens"], 0);
  EXPECT_EQ(j["text"], "");

  const auto w = run_cli({"run", "-m", stories(), "-p", "Once upon a time", "-n", "2", "--temp", "0", "-c", "4096"});
  ASSERT_EQ(w.rc, 0) << w.err;
  EXPECT_EQ(w.err, "snapkv: warning: -c 4096 exceeds the model's training context of 2048 tokens\n");
}

// Runs `sh -c cmd`; returns the exit status word and leaves stderr in `err`.
int shell(const std::string& cmd, std::string& err) {
  const fs::path e = fs::temp_directory_path() / ("snapkv_e2e_sh_" + std::to_string(::getpid()));
  const int status = std::system((cmd + " 2>" + shell_quote(e.string())).c_str());
  err = slurp(e);
  fs::remove(e);
  return status;
}

TEST(CliLimits, ClosedPipeIsQuietAndFullDiskIsAnError) {
  const std::string bin = shell_quote((binary_dir() / "snapkv").string());
  const std::string run = bin + " run -m " + shell_quote(stories()) + " -p 'Once upon a time' --ignore-eos -t 1";
  std::string err;
  shell("(" + run + " -n 2000 | head -c 10 >/dev/null)", err);
  EXPECT_EQ(err, "") << "a reader that goes away must not produce a crash report";
  // With SIGPIPE ignored the write fails with EPIPE instead: still quiet, and the run stops.
  shell("(trap '' PIPE; " + run + " -n 2000 | head -c 10 >/dev/null)", err);
  EXPECT_EQ(err, "") << "EPIPE must end the run quietly";

  if (fs::exists("/dev/full")) {
    // Used to exit 0 with the text lost.
    const int status = shell(run + " -n 20 >/dev/full", err);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status;
    EXPECT_EQ(err, "snapkv: error: cannot write the output to stdout: No space left on device\n");
  }
}

TEST(CliInspectAll, EverySharedGgufGivesValidJson) {
  std::vector<fs::path> files;
  for (const char* sub : {"models", "tokenizers"}) {
    for (const auto& e : fs::directory_iterator(shared_dir() / sub)) {
      if (e.path().extension() == ".gguf") files.push_back(e.path());
    }
  }
  ASSERT_GE(files.size(), 8u);
  for (const auto& f : files) {
    const auto r = run_cli({"inspect", "-m", f.string(), "--json"});
    ASSERT_EQ(r.rc, 0) << f << ": " << r.err;  // vocab-only files used to fail
    ASSERT_TRUE(valid_utf8(r.out)) << f;
    const json j = json::parse(r.out);
    const bool runnable = f.parent_path().filename() == "models";
    EXPECT_EQ(j["runnable"], runnable) << f;
    EXPECT_EQ(j["hyperparameters"].is_null(), !runnable) << f;
    EXPECT_EQ(j["model_error"].is_null(), runnable) << f;
    EXPECT_EQ(r.err.empty(), runnable) << f << ": " << r.err;  // a one-line note otherwise
    EXPECT_TRUE(j["metadata"].contains("general.architecture")) << f;
    EXPECT_TRUE(j["metadata"].contains("tokenizer.ggml.model")) << f;
    EXPECT_EQ(j["tensors"].empty(), !runnable) << f;
  }
}

TEST(CliTokenizeSpecial, SpecialTextsOnlyWithParseSpecial) {
  const auto plain = run_cli({"tokenize", "-m", stories(), "-p", "<s>Hi</s>", "--json"});
  const auto special = run_cli({"tokenize", "-m", stories(), "-p", "<s>Hi</s>", "--json", "--parse-special"});
  const auto no_bos =
      run_cli({"tokenize", "-m", stories(), "-p", "<s>Hi</s>", "--json", "--parse-special", "--no-bos"});
  ASSERT_EQ(plain.rc, 0) << plain.err;
  ASSERT_EQ(special.rc, 0) << special.err;
  ASSERT_EQ(no_bos.rc, 0) << no_bos.err;
  const auto p = json::parse(plain.out)["ids"].get<std::vector<int>>();
  const auto s = json::parse(special.out)["ids"].get<std::vector<int>>();
  const auto n = json::parse(no_bos.out)["ids"].get<std::vector<int>>();
  // Plain: BOS, then "<", "s", ">" ... as text; no other id 1 (<s>) or 2 (</s>).
  ASSERT_FALSE(p.empty());
  EXPECT_EQ(p[0], 1);
  EXPECT_EQ(std::count(p.begin(), p.end(), 1), 1);
  EXPECT_EQ(std::count(p.begin(), p.end(), 2), 0);
  // Parsed: BOS, <s>, text, </s> (llama.cpp gives the same ids for this SPM vocabulary).
  ASSERT_GE(s.size(), 4u);
  EXPECT_EQ(s[0], 1);
  EXPECT_EQ(s[1], 1);
  EXPECT_EQ(s.back(), 2);
  EXPECT_EQ(n, std::vector<int>(s.begin() + 1, s.end()));
  EXPECT_LT(s.size(), p.size());
}

}  // namespace
}  // namespace snapkv::test
