// EvalSmoke: the CI smoke subset of `snapkv eval` on a real model (SmolLM2-135M-Instruct from
// the model cache; skipped when it is missing), end to end through the CLI: the JSONL records,
// the CSV and JSON summaries, PNG and SVG pictures and index.html; then --resume finds nothing
// left to do. The run stays in <build>/eval-smoke/ to be looked at (index.html).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "eval_test_util.h"

namespace snapkv::eval {
namespace {

namespace fs = std::filesystem;

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs build/snapkv with `args`; returns the exit status, stderr in `err`.
int run_cli(const std::vector<std::string>& args, std::string& err) {
  const fs::path log = fs::temp_directory_path() / ("snapkv_smoke_" + std::to_string(::getpid()) + ".err");
  std::string cmd = quote((test::binary_dir() / "snapkv").string());
  for (const auto& a : args) cmd += " " + quote(a);
  cmd += " >/dev/null 2>" + quote(log.string()) + " </dev/null";
  const int status = std::system(cmd.c_str());
  err = test::file_bytes(log);
  fs::remove(log);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

size_t lines(const fs::path& p) {
  std::ifstream in(p);
  size_t n = 0;
  for (std::string l; std::getline(in, l);) n += l.empty() ? 0 : 1;
  return n;
}

TEST(EvalSmoke, RealModelEndToEnd) {
  if (!fs::exists(test::smollm2_path()))
    GTEST_SKIP() << "SmolLM2 not in the model cache (scripts/get-model.sh smollm2)";
  const fs::path out = test::binary_dir() / "eval-smoke";
  fs::remove_all(out);
  const std::vector<std::string> args = {"eval",
                                         "-m",
                                         test::smollm2_path().string(),
                                         "--tasks",
                                         "niah_single_2,niah_grid,fidelity",
                                         "--lengths",
                                         "1K",
                                         "--depths",
                                         "0,50,100",
                                         "--presses",
                                         "snapkv:ratio=0.75,streamingllm:ratio=0.75",
                                         "--protocol",
                                         "both",
                                         "--samples",
                                         "1",
                                         "--gen-tokens",
                                         "16",
                                         "-t",
                                         "2",
                                         "--out",
                                         out.string()};
  std::string err;
  ASSERT_EQ(run_cli(args, err), 0) << err;
  // Records: niah_single_2 and 3 grid cells x 3 presses x 2 protocols, fidelity x 3 presses.
  EXPECT_EQ(lines(out / "samples.jsonl"), 4u * 3u * 2u + 3u);
  std::ifstream first(out / "samples.jsonl");
  std::string line;
  std::getline(first, line);
  const auto rec = nlohmann::json::parse(line);
  for (const char* k : {"sample_id", "task", "length", "depth", "press", "protocol", "answer", "expected", "score",
                        "kv_cache_bytes", "prefill_ms", "decode_ms"})
    EXPECT_TRUE(rec.contains(k)) << k;
  EXPECT_EQ(rec["press_name"], "none");  // the full-cache reference comes first
  const std::string csv = test::file_bytes(out / "summary.csv");
  EXPECT_EQ(csv.rfind("task,length,press,", 0), 0u);
  EXPECT_EQ(lines(out / "summary.csv"), 1u + 3u * 2u * 2u + 3u);
  std::ifstream sj(out / "summary.json");
  const auto summary = nlohmann::json::parse(sj);
  EXPECT_GT(summary["run"]["prefill_saved_ms"].get<double>(), 0.0);
  EXPECT_EQ(summary["config"]["model"]["sha256"].get<std::string>().size(), 64u);
  size_t png = 0, svg = 0;
  for (const auto& e : fs::directory_iterator(out / "plots")) {
    const std::string bytes = test::file_bytes(e.path());
    if (e.path().extension() == ".png") {
      ++png;
      EXPECT_EQ(bytes.substr(1, 3), "PNG") << e.path();
    }
    if (e.path().extension() == ".svg") {
      ++svg;
      EXPECT_NE(bytes.find("<svg"), std::string::npos) << e.path();
    }
  }
  // 3 presses x 2 protocols heatmaps, one picture per protocol with the 3 side by side, 2 score
  // plots (niah_single_2, niah_grid), 1 fidelity.
  EXPECT_EQ(png, 11u);
  EXPECT_TRUE(fs::exists(out / "plots" / "niah_grid__all__aware.png"));
  EXPECT_TRUE(fs::exists(out / "plots" / "niah_grid__all__agnostic.png"));
  EXPECT_EQ(svg, png);
  const std::string index = test::file_bytes(out / "index.html");
  EXPECT_NE(index.find("<img src='plots/"), std::string::npos);
  EXPECT_NE(index.find("niah_single_2"), std::string::npos);
  EXPECT_NE(index.find("KV cache f16, fidelity reference f16"), std::string::npos);
  // Resume: nothing left to do, nothing rewritten.
  std::vector<std::string> again = args;
  again.push_back("--resume");
  ASSERT_EQ(run_cli(again, err), 0) << err;
  EXPECT_NE(err.find("0 samples run, 5 skipped; 0 records written (27 already there)"), std::string::npos) << err;
  EXPECT_EQ(lines(out / "samples.jsonl"), 27u);
}

// `--press-grid` with `--budgets` alone is a budget grid: the default --ratios do not join it;
// with both given, it crosses the names with each (stories260K, 2 fidelity forks, no pictures).
TEST(EvalCli, BudgetsAloneMakeABudgetGrid) {
  const fs::path out = fs::temp_directory_path() / ("snapkv_evalcli_" + std::to_string(::getpid()));
  const std::string model = (test::shared_dir() / "models" / "stories260K.gguf").string();
  for (const bool with_ratios : {false, true}) {
    fs::remove_all(out);
    std::vector<std::string> args = {"eval", "-m",           model,    "--tasks",   "fidelity",  "--lengths",
                                     "400",  "--press-grid", "snapkv", "--budgets", "64",        "--samples",
                                     "1",    "--no-plots",   "-q",     "--out",     out.string()};
    if (with_ratios) args.insert(args.end(), {"--ratios", "0.5"});
    std::string err;
    ASSERT_EQ(run_cli(args, err), 0) << err;
    std::ifstream cin_(out / "config.json");
    const auto presses = nlohmann::json::parse(cin_)["presses"];
    ASSERT_EQ(presses.size(), with_ratios ? 3u : 2u) << presses.dump();
    EXPECT_EQ(presses[0], "none");
    std::string all = presses.dump();
    EXPECT_NE(all.find("budget=64"), std::string::npos) << all;
    EXPECT_EQ(all.find("ratio=0.5") != std::string::npos, with_ratios) << all;
    EXPECT_EQ(all.find("ratio=0.75"), std::string::npos) << all;
  }
  fs::remove_all(out);
}

}  // namespace
}  // namespace snapkv::eval
