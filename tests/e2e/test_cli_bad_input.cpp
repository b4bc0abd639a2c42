// End to end: hostile-but-fair input to `snapkv`. Every error must be ONE stderr line that names
// what is wrong, a non-zero exit and nothing on stdout. All cases fail before or at model load on
// stories260K, so the whole file runs in about a second.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "support/gguf_writer.h"

namespace snapkv::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string stories() { return (shared_dir() / "models" / "stories260K.gguf").string(); }

// A scratch directory for the files these tests write; removed at the end of each test.
class TempDir {
 public:
  TempDir() : dir_(fs::temp_directory_path() / ("snapkv_e2e_bad_" + std::to_string(::getpid()))) {
    fs::create_directories(dir_);
  }
  ~TempDir() { fs::remove_all(dir_); }
  fs::path write(const std::string& name, const std::string& bytes) const {
    std::ofstream(dir_ / name, std::ios::binary) << bytes;
    return dir_ / name;
  }
  const fs::path& path() const { return dir_; }

 private:
  fs::path dir_;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct Case {
  std::vector<std::string> args;
  std::vector<std::string> needles;  ///< all must appear in the error line
  int rc = 0;                        ///< expected exit code (1: runtime error, 2: bad command line)
};

void expect_one_line_error(const Case& c) {
  std::string cmd;
  for (const auto& a : c.args) cmd += a + " ";
  const auto r = run_cli(c.args);
  EXPECT_EQ(r.rc, c.rc) << cmd << "\nstderr: " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << cmd << "\nstderr: " << r.err;
  EXPECT_EQ(r.err.rfind("snapkv: error: ", 0), 0u) << cmd << "\nstderr: " << r.err;
  for (const auto& n : c.needles)
    EXPECT_NE(r.err.find(n), std::string::npos) << cmd << "\nwant '" << n << "' in: " << r.err;
  EXPECT_EQ(r.out, "") << cmd;
}

std::vector<std::string> run_args(std::vector<std::string> extra) {
  std::vector<std::string> a{"run", "-m", stories(), "-p", "Once upon a time", "-n", "4", "--temp", "0"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

TEST(CliBadFlags, OutOfRangeWrongTypeAndEmptyValues) {
  const std::vector<Case> cases = {
      {run_args({"-n", "-1"}), {"--n-predict", "[0, 1073741824]", "'-1'"}, 2},
      {run_args({"-n", ""}), {"--n-predict", "''"}, 2},
      {run_args({"-t", "10000"}), {"--threads", "[0, 1024]", "'10000'"}, 2},
      {run_args({"-t", "abc"}), {"--threads", "'abc'"}, 2},
      {run_args({"-c", "1099511627776"}), {"--ctx-size", "'1099511627776'"}, 2},
      {run_args({"-c", "0x10"}), {"--ctx-size", "'0x10'"}, 2},
      {run_args({"--temp", "nan"}), {"--temp", "'nan'"}, 2},
      {run_args({"--temp", "inf"}), {"--temp", "'inf'"}, 2},
      {run_args({"--temp", "-0.5"}), {"--temp", "[0, 100]"}, 2},
      {run_args({"--top-p", "0"}), {"--top-p", "(0, 1]", "'0'"}, 2},
      {run_args({"--top-p", "nan"}), {"--top-p", "'nan'"}, 2},
      {run_args({"--top-k", "-5"}), {"--top-k", "'-5'"}, 2},
      // Was silently clamped / wrapped to 2^64-1.
      {run_args({"--seed", "18446744073709551616"}), {"--seed", "'18446744073709551616'"}, 2},
      {run_args({"--seed", "-1"}), {"--seed", "'-1'"}, 2},
      {run_args({"--seed", "1.5"}), {"--seed", "'1.5'"}, 2},
      {run_args({"--kv-type", "q8"}), {"--kv-type", "f16|f32", "'q8'"}, 2},
      {run_args({"--prefill-attn", "bf8"}), {"--prefill-attn", "exact|bf16", "'bf8'"}, 2},
      {run_args({"--prefill-attn", "BF16"}), {"--prefill-attn", "exact|bf16", "'BF16'"}, 2},
      {run_args({"--prefill-attn", ""}), {"--prefill-attn", "''"}, 2},
      {{"serve", "-m", stories(), "--prefill-attn", "fast"}, {"--prefill-attn", "exact|bf16", "'fast'"}, 2},
      {{"eval", "-m", stories(), "--out", "/nonexistent/eval", "--prefill-attn", "f32"},
       {"--prefill-attn", "exact|bf16", "'f32'"},
       2},
      {run_args({"--press", ""}), {"--press", "snapkv", "''"}, 2},
      {run_args({"--press", "snapkvv"}), {"--press", "'snapkvv'"}, 2},
      {run_args({"--press", "snapkv", "--budget", "0"}), {"--budget", "'0'"}, 2},
      {run_args({"--press", "snapkv", "--budget", "-1"}), {"--budget", "'-1'"}, 2},
      // Was silently clamped to INT64_MAX.
      {run_args({"--press", "snapkv", "--budget", "99999999999999999999"}), {"--budget", "'99999999999999999999'"}, 2},
      {run_args({"--press", "snapkv", "--budget", "8"}), {"--budget 8", "--window 32"}, 1},
      {run_args({"--press", "snapkv", "--compression-ratio", "1"}), {"--compression-ratio", "[0, 1)", "'1'"}, 2},
      {run_args({"--press", "snapkv", "--compression-ratio", "nan"}), {"--compression-ratio", "'nan'"}, 2},
      {run_args({"--press", "snapkv", "--budget", "64", "--compression-ratio", "0.5"}), {"excludes"}, 2},
      {run_args({"--press", "snapkv", "--window", "0"}), {"--window", "'0'"}, 2},
      {run_args({"--press", "snapkv", "--window", "-3"}), {"--window", "'-3'"}, 2},
      {run_args({"--press", "snapkv", "--window", "1000000000000"}), {"--window", "'1000000000000'"}, 2},
      {run_args({"--press", "snapkv", "--kernel", "0"}), {"--kernel", "'0'"}, 2},
      {run_args({"--press", "snapkv", "--kernel", "4"}), {"--kernel", "odd", "4"}, 1},
      {run_args({"--press", "snapkv", "--pool", "xx"}), {"--pool", "max|avg", "'xx'"}, 2},
      {run_args({"--press", "snapkv", "--pool", "1"}), {"--pool", "'1'"}, 2},  // was accepted as an enum index
      {run_args({"--press", "snapkv", "--gqa-agg", "xx"}), {"--gqa-agg", "mean|max|sum", "'xx'"}, 2},
      {run_args({"--press", "streamingllm", "--sinks", "-1"}), {"--sinks", "'-1'"}, 2},
      {run_args({"--press", "streamingllm", "--budget", "64", "--sinks", "100"}), {"--sinks 100", "--budget 64"}, 1},
      // Was silently ignored.
      {run_args({"--question", ""}), {"--question", "must not be empty"}, 2},
      {run_args({"--dump-kept", ""}), {"--dump-kept", "must not be empty"}, 2},
      // Was silently uncompressed.
      {run_args({"--budget", "64"}), {"--budget", "--press"}, 1},
      // stories260K's head_dim 8 cannot be stored in Q8_0 blocks of 32
      {run_args({"--kv-type", "q8_0"}), {"--kv-type q8_0", "multiple of 32", "is 8"}, 1},
      {run_args({"--kv-type", "q4_0"}), {"--kv-type q4_0", "multiple of 32", "is 8"}, 1},
      {run_args({"--kv-type", "q4_1"}), {"--kv-type", "q4_1"}, 2},
      {run_args({"--kv-type-v", "q4_1"}), {"--kv-type-v", "q4_1"}, 2},
      // Mixed key / value types must both be quantized (refused before the model is loaded).
      {run_args({"--kv-type-v", "q4_0"}), {"--kv-type f16", "--kv-type-v q4_0", "both be quantized"}, 1},
      {run_args({"--kv-type", "q8_0", "--kv-type-v", "f16"}), {"--kv-type q8_0", "--kv-type-v f16"}, 1},
      {run_args({"--kv-type", "q8_0", "--kv-type-v", "q4_0"}), {"--kv-type q8_0", "multiple of 32", "is 8"}, 1},
      {{"run", "-m", "/nonexistent/model.gguf", "-p", "hi", "--kv-type-v", "q4_0"}, {"both be quantized"}, 1},
      {{"serve", "-m", stories(), "--kv-type-v", "q4_0"},
       {"--kv-type f16", "--kv-type-v q4_0", "both be quantized"},
       1},
      // The session cold tier's directory is checked at start-up, not at the first session request
      // (whose client was then told 400 for the server's setting).
      {{"serve", "-m", stories(), "--session-cold-tier", "disk:/nonexistent/snapkv-cold"},
       {"--session-cold-tier", "cannot create a file in /nonexistent/snapkv-cold"},
       1},
      {{"eval", "-m", stories(), "--out", "/nonexistent/eval", "--kv-type", "q8_0", "--kv-type-v", "f32"},
       {"--kv-type q8_0", "--kv-type-v f32", "both be quantized"},
       1},
      {run_args({"--compression-ratio", "0.5"}), {"--compression-ratio", "--press"}, 1},
      {{"run", "-m", "", "-p", "hi"}, {"--model", "must not be empty"}, 2},  // was: the default model, silently
      {{"inspect", "-m", ""}, {"--model", "must not be empty"}, 2},
      {{"run", "-m", stories(), "-p", ""}, {"--prompt", "must not be empty"}, 2},
      {{"run", "-m", stories()}, {"no prompt", "-p", "-f"}, 1},
      {{"run", "-m", stories(), "-p", "hi", "extra"}, {"extra"}, 2},
      {{"tokenize", "-m", stories()}, {"no text to tokenize", "-p TEXT", "-f FILE"}, 1},
      {{"tokenize", "-m", stories(), "-p", "hi", "-f", "x.txt"}, {"--prompt", "excludes", "--file"}, 2},
      {{"tokenize", "-m", stories(), "-f", ""}, {"--file", "must not be empty"}, 2},
      // The grid's --ratios / --budgets beside whole --presses specs were silently dropped.
      {{"eval", "-m", stories(), "--out", "/nonexistent/eval", "--presses", "snapkv:budget=64", "--ratios", "-5"},
       {"--presses", "excludes", "--ratios"},
       2},
      {{"eval", "-m", stories(), "--out", "/nonexistent/eval", "--presses", "snapkv:budget=64", "--budgets", "0"},
       {"--presses", "excludes", "--budgets"},
       2},
  };
  for (const auto& c : cases) expect_one_line_error(c);
}

// `serve --prefill-attn bf16` on a CPU or build without AVX512-BF16 logged "listening on ..."
// before the engine refused it; the option is now refused before the port is bound.
TEST(CliBadFlags, ServeRefusesAnUnsupportedPrefillAttentionBeforeListening) {
  const auto probe = run_cli(run_args({"--prefill-attn", "bf16"}));
  if (probe.rc == 0) GTEST_SKIP() << "this CPU and build run --prefill-attn bf16";
  ASSERT_NE(probe.err.find("'bf16' is not supported"), std::string::npos) << probe.err;
  expect_one_line_error(
      {{"serve", "-m", stories(), "--prefill-attn", "bf16"}, {"'bf16' is not supported", "AVX512-BF16"}, 1});
}

// A file named like a cached model in the working directory wins over the name: when it is no
// GGUF file, the one error line says that it hid the cached model; a GGUF file of that name loads.
TEST(CliBadFlags, AFileNamedLikeACachedModelSaysItHidTheModel) {
  const TempDir tmp;
  for (const char* bytes : {"", "not a model"}) {
    tmp.write("smollm2", bytes);
    const auto r = run_cli({"inspect", "-m", "smollm2"}, tmp.path());
    EXPECT_EQ(r.rc, 1) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find("snapkv: error: -m smollm2: 'smollm2' in the working directory is not a GGUF file and "
                         "hides the cached model smollm2"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(r.out, "");
  }
  fs::remove(tmp.path() / "smollm2");
  fs::create_directory(tmp.path() / "gemma3");  // a directory of that name hides it too
  EXPECT_NE(run_cli({"inspect", "-m", "gemma3"}, tmp.path()).err.find("hides the cached model gemma3"),
            std::string::npos);
  tmp.write("smollm2", slurp(stories()));
  const auto ok = run_cli({"inspect", "-m", "smollm2"}, tmp.path());
  EXPECT_EQ(ok.rc, 0) << ok.err;
  EXPECT_NE(ok.out.find("llama"), std::string::npos) << ok.out;
}

TEST(CliBadFlags, SubcommandErrors) {
  expect_one_line_error({{}, {"subcommand"}, 2});
  // Was "A subcommand is required", not naming the typo.
  expect_one_line_error(
      {{"rnu", "-p", "hi"}, {"unknown subcommand 'rnu'", "run, serve, inspect, tokenize, chat-template or eval"}, 2});
  expect_one_line_error({{"-m", stories(), "run", "-p", "hi"}, {"'-m' before the subcommand"}, 2});
  expect_one_line_error({{"run", "--bogus"}, {"--bogus"}, 2});
}

TEST(CliBadFlags, HelpListsTheDefaults) {
  const auto r = run_cli({"run", "--help"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.rfind("generate text from a prompt\nUsage: snapkv run", 0), 0u) << r.out;
  // Each option's help entry (up to the next option) must show its default.
  const std::vector<std::pair<std::string, std::string>> defaults = {
      {"-n,--n-predict", "]=128\n"},   {"--temp", "]=0.8\n"},           {"--top-k", "]=40\n"},
      {"--top-p", "]=0.95\n"},         {"--kv-type", "q4_0=f16"},       {"--press", "PRESS=none "},
      {"--budget", "(default 1024)"},  {"--window", "]=32\n"},          {"--kernel", "]=7\n"},
      {"--pool", "(default max)"},     {"--gqa-agg", "(default mean)"}, {"--sinks", "]=4\n"},
      {"--prefill-attn", "int8=exact"}};
  for (const auto& [opt, want] : defaults) {
    const size_t at = r.out.find("  " + opt + " ");
    ASSERT_NE(at, std::string::npos) << opt;
    const size_t next = r.out.find("\n  -", at + 1);
    const std::string entry = r.out.substr(at, next == std::string::npos ? std::string::npos : next - at + 1);
    EXPECT_NE(entry.find(want), std::string::npos) << opt << " help entry lacks its default " << want << ": " << entry;
  }
  for (const char* sub : {"inspect", "tokenize"}) {
    const auto h = run_cli({sub, "--help"});
    EXPECT_EQ(h.rc, 0) << sub;
    EXPECT_NE(h.out.find("-m,--model"), std::string::npos) << sub;
  }
  const auto top = run_cli({"--help"});
  EXPECT_EQ(top.rc, 0);
  for (const char* sub : {"run", "inspect", "tokenize"}) EXPECT_NE(top.out.find(sub), std::string::npos);
}

TEST(CliBadFiles, PromptFiles) {
  const TempDir tmp;
  const fs::path empty = tmp.write("empty.txt", "");
  const fs::path binary = tmp.write("big.bin", std::string(3000, '\x9c'));
  std::string long_text;
  for (int i = 0; i < 400; ++i) long_text += "Once upon a time there was a little girl named Lily. ";
  const fs::path long_file = tmp.write("long.txt", long_text);
  const std::vector<Case> cases = {
      // Was: generation from BOS alone, exit 0, while -p '' was an error.
      {{"run", "-m", stories(), "-f", empty.string()}, {"empty.txt", "is empty", "-f"}, 1},
      {{"run", "-m", stories(), "-f", tmp.path().string()}, {tmp.path().string(), "not a file"}, 1},
      {{"run", "-m", stories(), "-f", "/nonexistent/prompt.txt"}, {"/nonexistent/prompt.txt"}, 1},
      {{"run", "-m", stories(), "-f", binary.string()}, {"prompt of", "does not fit the context of 2048 tokens"}, 1},
      {{"run", "-m", stories(), "-f", long_file.string()}, {"does not fit the context of 2048 tokens", "-c"}, 1},
      {{"run", "-m", stories(), "-p", "Once upon a time", "-c", "1"}, {"does not fit the context of 1 tokens"}, 1},
      {{"run", "-m", stories(), "-p", "hi", "--chat"}, {"stories260K.gguf", "no chat template"}, 1},
      {{"tokenize", "-m", stories(), "-f", "/nonexistent/text.txt"}, {"'/nonexistent/text.txt'", "not a file"}, 1},
      {{"tokenize", "-m", stories(), "-f", tmp.path().string()}, {tmp.path().string(), "not a file"}, 1},
  };
  for (const auto& c : cases) expect_one_line_error(c);
}

TEST(CliBadFiles, DumpKeptPathFailsBeforeTheRun) {
  const TempDir tmp;
  const std::vector<std::string> press{"--press", "snapkv", "--budget", "64"};
  auto args = [&](const std::string& path) {
    auto a = run_args(press);
    a.insert(a.end(), {"--dump-kept", path});
    return a;
  };
  // Both used to fail only after the whole generation had been printed.
  expect_one_line_error({args(tmp.path().string()), {"--dump-kept", tmp.path().string(), "is a directory"}, 1});
  expect_one_line_error({args("/nonexistent/dir/kept.json"), {"/nonexistent/dir/kept.json", "No such file"}, 1});
}

TEST(CliBadFiles, ModelFiles) {
  const TempDir tmp;
  const std::string model = slurp(stories());
  ASSERT_GT(model.size(), 1000000u);
  std::vector<Case> cases = {
      {{"run", "-m", tmp.path().string(), "-p", "hi"}, {tmp.path().string(), "not a regular file"}, 1},
      {{"run", "-m", tmp.write("empty.gguf", "").string(), "-p", "hi"}, {"empty.gguf", "end of file"}, 1},
      {{"run", "-m", tmp.write("text.gguf", "Once upon a time").string(), "-p", "hi"}, {"text.gguf", "bad magic"}, 1},
      {{"run", "-m", "/nonexistent/model.gguf", "-p", "hi"}, {"/nonexistent/model.gguf", "does not exist"}, 1},
  };
  // Cut inside the header, the metadata, the tensor infos and the tensor data.
  for (size_t cut : {3, 4, 8, 20, 100, 1000, 5000, 50000, 1000000, 1185375}) {
    ASSERT_LT(cut, model.size());
    const fs::path p = tmp.write("cut_" + std::to_string(cut) + ".gguf", model.substr(0, cut));
    cases.push_back({{"run", "-m", p.string(), "-p", "hi"}, {p.filename().string()}, 1});
    cases.push_back({{"inspect", "-m", p.string()}, {p.filename().string()}, 1});
  }
  const fs::path tok = shared_dir() / "tokenizers";
  cases.push_back({{"run", "-m", (tok / "ggml-vocab-falcon.gguf").string(), "-p", "hi"},
                   {"ggml-vocab-falcon.gguf", "unsupported architecture 'falcon'", "llama, gemma3"},
                   1});
  cases.push_back({{"run", "-m", (tok / "ggml-vocab-llama-spm.gguf").string(), "-p", "hi"},
                   {"ggml-vocab-llama-spm.gguf", "token_embd.weight", "missing"},
                   1});
  for (const auto& c : cases) expect_one_line_error(c);
}

// A GGUF whose strings carry a newline, an ANSI escape and invalid UTF-8: the error stays one
// printable line (the bytes are written as \xNN) and inspect --json stays valid UTF-8 JSON.
TEST(CliBadFiles, HostileStringsInAGGUF) {
  const TempDir tmp;
  GGUFWriter w;
  w.add_string("general.architecture", "evil\n\x1b[2J\xff");
  w.add_string("general.name", "bad \xc3\x28 name");
  const std::vector<float> weights(32, 1.0f);
  w.add_tensor_f32("bad\xfe.weight", {32}, weights);
  const fs::path p = tmp.path() / "hostile.gguf";
  w.write(p.string());

  expect_one_line_error(
      {{"run", "-m", p.string(), "-p", "hi"}, {"unsupported architecture 'evil\\x0A\\x1B[2J\\xFF'"}, 1});
  const auto r = run_cli({"run", "-m", p.string(), "-p", "hi"});
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos);

  // inspect used to fail on any GGUF snapkv cannot run, and on invalid UTF-8 in metadata.
  const auto j = run_cli({"inspect", "-m", p.string(), "--json"});
  ASSERT_EQ(j.rc, 0) << j.err;
  const json doc = json::parse(j.out);  // throws on invalid UTF-8
  EXPECT_EQ(doc["runnable"], false);
  EXPECT_TRUE(doc["hyperparameters"].is_null());
  EXPECT_NE(doc["model_error"].get<std::string>().find("unsupported architecture"), std::string::npos);
  EXPECT_EQ(doc["metadata"]["general.name"], "bad \xef\xbf\xbd( name");  // U+FFFD for the bad byte
  ASSERT_EQ(doc["tensors"].size(), 1u);
  EXPECT_EQ(doc["tensors"][0]["dims"], json::array({32}));

  const auto t = run_cli({"inspect", "-m", p.string()});
  ASSERT_EQ(t.rc, 0) << t.err;
  EXPECT_NE(t.out.find("evil\\x0A\\x1B[2J\\xFF"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("bad\\xFE.weight"), std::string::npos) << t.out;
  EXPECT_EQ(t.out.find('\x1b'), std::string::npos);
}

}  // namespace
}  // namespace snapkv::test
