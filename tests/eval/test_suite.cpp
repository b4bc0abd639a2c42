// The suite: flag lists, the summary, JSONL resume; a whole run on stories260K into a
// directory, resumed; and `snapkv eval` end to end on SmolLM2 (the CI smoke subset).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "eval/report.h"
#include "eval/suite.h"
#include "eval/tasks.h"
#include "eval_test_util.h"

namespace snapkv::eval {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / fmt::format("snapkv_eval_{}_{}", name, ::getpid());
  fs::remove_all(p);
  return p;
}

TEST(SuiteFlags, Lists) {
  EXPECT_EQ(split_press_list("snapkv:budget=512,window=16,tova:ratio=0.5,none,knorm"),
            (std::vector<std::string>{"snapkv:budget=512,window=16", "tova:ratio=0.5", "none", "knorm"}));
  EXPECT_THROW(split_press_list("window=16,snapkv"), Error);
  EXPECT_THROW(split_press_list("snapkv,,tova"), Error);
  EXPECT_EQ(parse_lengths("2K,4096,1k"), (std::vector<int64_t>{2048, 4096, 1024}));
  for (const char* bad : {"", "2M", "-1", "0", "4K2", "K"}) EXPECT_THROW(parse_lengths(bad), Error) << bad;
  // A length or depth given twice would run (and count) the same samples twice.
  for (const char* bad : {"1K,1024", "4096,4K", "2K,2K"}) EXPECT_THROW(parse_lengths(bad), Error) << bad;
  EXPECT_EQ(parse_depths("0,33.3,33.4,100"), (std::vector<double>{0.0, 0.333, 0.334, 1.0}));
  EXPECT_EQ(parse_depths("12.345"), (std::vector<double>{0.1235}));  // to 0.01 %
  for (const char* bad : {"50,50", "33.331,33.334", "", "101", "-1", "x", "nan", "50,"})
    EXPECT_THROW(parse_depths(bad), Error) << bad;
  // Sample ids tell depths apart to 0.01 % (33.3 and 33.4 were both "d33", so --resume skipped one).
  auto id = [](double depth) { return sample_id(SampleRequest{"niah_grid", 1024, 7, 0, depth}); };
  EXPECT_EQ(id(0.5), "niah_grid/1024/0/d50");
  EXPECT_EQ(id(0.333), "niah_grid/1024/0/d33.3");
  EXPECT_EQ(id(0.334), "niah_grid/1024/0/d33.4");
  EXPECT_EQ(id(0.1235), "niah_grid/1024/0/d12.35");
  EXPECT_EQ(id(0.0), "niah_grid/1024/0/d0");
  EXPECT_EQ(sample_id(SampleRequest{"vt", 2048, 7, 3, -1}), "vt/2048/3");
  EXPECT_EQ(expand_tasks("ruler").size(), 11u);
  EXPECT_EQ(expand_tasks("all").size(), 14u);  // + niah_grid, fidelity, niah_followup
  EXPECT_EQ(expand_tasks("vt,ruler,vt").front(), "vt");
  EXPECT_THROW(expand_tasks("vt,nosuch"), Error);
  EXPECT_EQ(parse_protocols("both"), (std::vector<Protocol>{Protocol::Aware, Protocol::Agnostic}));
  EXPECT_EQ(parse_protocols("multi,aware").size(), 2u);
  EXPECT_EQ(parse_protocols("followup,reselect"), (std::vector<Protocol>{Protocol::Followup, Protocol::Reselect}));
  EXPECT_THROW(parse_protocols("continuation"), Error);
  EXPECT_THROW(parse_protocols("sideways"), Error);
  EXPECT_EQ(press_grid({"snapkv", "none", "knorm"}, {"0.5"}, {"256"}),
            (std::vector<std::string>{"snapkv:ratio=0.5", "snapkv:budget=256", "none", "knorm:ratio=0.5",
                                      "knorm:budget=256"}));
}

TEST(Report, SummaryFractionOfFull) {
  auto rec = [](const char* press, const char* name, double score, const char* proto = "aware") {
    return nlohmann::json{{"task", "vt"},         {"length", 1024},       {"press", press},    {"press_name", name},
                          {"protocol", proto},    {"ratio", nullptr},     {"budget", nullptr}, {"score", score},
                          {"kept_fraction", 0.5}, {"kv_cache_bytes", 100}};
  };
  const std::vector<nlohmann::json> recs = {rec("none", "none", 1.0),
                                            rec("none", "none", 0.5),
                                            rec("snapkv:x", "snapkv", 0.5),
                                            rec("snapkv:x", "snapkv", 0.25),
                                            rec("none", "none", 0.0, "agnostic"),
                                            rec("snapkv:x", "snapkv", 0.0, "agnostic")};
  const auto rows = summarize(recs);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0]["n"], 2);
  EXPECT_DOUBLE_EQ(rows[0]["score"].get<double>(), 75.0);
  EXPECT_DOUBLE_EQ(rows[1]["score"].get<double>(), 37.5);
  EXPECT_DOUBLE_EQ(rows[1]["score_full"].get<double>(), 75.0);
  EXPECT_DOUBLE_EQ(rows[1]["fraction_of_full"].get<double>(), 0.5);
  EXPECT_TRUE(rows[3]["fraction_of_full"].is_null());  // full score 0
  const std::string csv = summary_csv(rows);
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "task,length,press,press_name,protocol,ratio,budget,n,score,score_full,fraction_of_full,kept_fraction,"
            "kv_cache_bytes,kl,top1,ppl_full,ppl,ppl_delta");
  EXPECT_NE(csv.find("vt,1024,snapkv:x,snapkv,aware,,,2,37.5,75,0.5,0.5,100,,,,,"), std::string::npos) << csv;
}

TEST(Report, JsonlDropsATruncatedLastLineOnly) {
  const fs::path d = temp_dir("jsonl");
  fs::create_directories(d);
  const fs::path p = d / "x.jsonl";
  { std::ofstream(p) << "{\"a\":1}\n{\"a\":2}\n{\"a\":"; }
  bool dropped = false;
  EXPECT_EQ(read_jsonl(p.string(), &dropped).size(), 2u);
  EXPECT_TRUE(dropped);
  { std::ofstream(p) << "{\"a\":1}\nnot json\n{\"a\":2}\n"; }
  EXPECT_THROW(read_jsonl(p.string()), Error);
  EXPECT_TRUE(read_jsonl((d / "missing").string()).empty());
  fs::remove_all(d);
}

TEST(Suite, RunsWritesAndResumes) {
  const fs::path d = temp_dir("suite");
  EvalConfig cfg;
  cfg.model_path = (test::shared_dir() / "models" / "stories260K.gguf").string();
  cfg.tasks = {"niah_single_2", "niah_grid", "fidelity"};
  cfg.lengths = {512};
  cfg.presses = {"snapkv:budget=64,window=16", "streamingllm:budget=64"};
  cfg.protocols = {Protocol::Aware, Protocol::Agnostic, Protocol::Multi};
  cfg.samples = 1;
  cfg.seed = 3;
  cfg.depths = {0.0, 1.0};
  cfg.chat = ChatMode::Off;
  cfg.gen_tokens = 8;
  cfg.threads = 2;
  int calls = 0;
  const SuiteResult r = run_suite(cfg, d.string(), false, [&](const SuiteProgress&) { ++calls; });
  // niah_single_2: 3 presses x 3 protocols (multi: 1 question); grid: 2 depths x 9; fidelity: 3.
  EXPECT_EQ(r.records, 9 + 18 + 3);
  EXPECT_EQ(r.samples_run, 4);
  EXPECT_EQ(calls, 8);  // before and after each sample
  EXPECT_GT(r.prefill_saved_ms, 0.0);
  for (const char* f : {"config.json", "samples.jsonl", "summary.csv", "summary.json"})
    EXPECT_TRUE(fs::exists(d / f)) << f;
  const auto recs = read_jsonl((d / "samples.jsonl").string());
  ASSERT_EQ(recs.size(), 30u);
  const auto rows = summarize(recs);
  EXPECT_EQ(rows.size(), 3u * 3u + 3u * 3u + 3u);
  std::ifstream cin_(d / "config.json");
  const auto cj = nlohmann::json::parse(cin_);
  EXPECT_EQ(cj["model"]["sha256"].get<std::string>().size(), 64u);
  EXPECT_EQ(cj["presses"][0], "none");
  EXPECT_TRUE(cj["snapkv"].contains("git_commit"));
  // Without --resume an existing run is not overwritten.
  EXPECT_THROW(run_suite(cfg, d.string(), false), Error);
  // Resume: nothing left to do.
  const SuiteResult again = run_suite(cfg, d.string(), true);
  EXPECT_EQ(again.records, 0);
  EXPECT_EQ(again.samples_skipped, 4);
  {  // the summary's run totals cover both invocations (the first one did all the prefills)
    std::ifstream sin(d / "summary.json");
    const auto run = nlohmann::json::parse(sin)["run"];
    EXPECT_EQ(run["invocations"], 2);
    EXPECT_EQ(run["prefill_ms"].get<double>(), 0.0);
    EXPECT_DOUBLE_EQ(run["prefill_ms_all"].get<double>(), r.prefill_ms);
    EXPECT_DOUBLE_EQ(run["prefill_saved_ms_all"].get<double>(), r.prefill_saved_ms);
    EXPECT_GE(run["wall_s_all"].get<double>(), r.wall_s);
  }
  // A killed run: the last record half-written and two records missing; resume redoes exactly those.
  std::vector<std::string> lines;
  {
    std::ifstream in(d / "samples.jsonl");
    for (std::string l; std::getline(in, l);) lines.push_back(l);
  }
  {
    std::ofstream out(d / "samples.jsonl", std::ios::trunc);
    for (size_t i = 0; i + 2 < lines.size(); ++i) out << lines[i] << "\n";
    out << lines[lines.size() - 2].substr(0, 20);
  }
  const SuiteResult fixed = run_suite(cfg, d.string(), true);
  EXPECT_EQ(fixed.records, 2);
  EXPECT_EQ(read_jsonl((d / "samples.jsonl").string()).size(), 30u);
  // A different sample set is refused on resume; more presses are fine.
  EvalConfig other = cfg;
  other.seed = 4;
  EXPECT_THROW(run_suite(other, d.string(), true), Error);
  other = cfg;
  other.presses.push_back("knorm:budget=64,window=16");
  EXPECT_EQ(run_suite(other, d.string(), true).records, 10);
  fs::remove_all(d);
}

// --resume on a damaged run directory: errors name the file (and the record), not just a JSON
// library's words; --gen-tokens must leave the prompt and its tokens within the model's context.
TEST(Suite, ResumeNamesWhatIsDamagedAndGenTokensMustFit) {
  const fs::path d = temp_dir("suite_damaged");
  EvalConfig cfg;
  cfg.model_path = (test::shared_dir() / "models" / "stories260K.gguf").string();
  cfg.tasks = {"niah_single_2"};
  cfg.lengths = {512};
  cfg.presses = {"snapkv:budget=64,window=16"};
  cfg.protocols = {Protocol::Aware};
  cfg.samples = 1;
  cfg.chat = ChatMode::Off;
  cfg.gen_tokens = 8;
  cfg.threads = 2;
  ASSERT_EQ(run_suite(cfg, d.string(), false).records, 2);  // none and snapkv
  const auto error_of = [&] {
    try {
      (void)run_suite(cfg, d.string(), true);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const auto write = [&](const char* name, const std::string& text) {
    std::ofstream(d / name, std::ios::trunc) << text;
  };
  std::string config, records;
  {
    std::ifstream c(d / "config.json"), r(d / "samples.jsonl");
    config.assign(std::istreambuf_iterator<char>(c), {});
    records.assign(std::istreambuf_iterator<char>(r), {});
  }
  for (const char* bad : {"{bad", "{}", "[]"}) {
    write("config.json", bad);
    const std::string e = error_of();
    EXPECT_NE(e.find("config.json' is not the config.json of an eval run"), std::string::npos) << bad << ": " << e;
  }
  write("config.json", config);
  for (const std::string& bad :
       {std::string("{}\n"),
        std::string(R"({"sample_id":"x","press":"none","protocol":"aware","question":0,"task":5})") + "\n"}) {
    write("samples.jsonl", bad + records);
    const std::string e = error_of();
    EXPECT_NE(e.find("samples.jsonl': record 1 is not an eval record"), std::string::npos) << bad << ": " << e;
  }
  write("samples.jsonl", records);
  EXPECT_EQ(error_of(), "");  // repaired: nothing left to run
  fs::remove(d / "config.json");
  fs::create_directory(d / "config.json");
  EXPECT_NE(error_of().find("config.json' is not a regular file"), std::string::npos);
  fs::remove_all(d);
  // stories260K's context is 2,048 positions: a 512-token sample (a prompt of 512 minus the
  // task's own 128) generating 2,000 tokens needs 2,384.
  cfg.gen_tokens = 2000;
  const std::string e = error_of();
  EXPECT_NE(e.find("--gen-tokens 2000 with --lengths 512: niah_single_2's prompt and its generated tokens take 2384 "
                   "positions, beyond the model's context of 2048 tokens"),
            std::string::npos)
      << e;
  fs::remove_all(d);
}

// --prefill-attn: config.json records the run's prefill attention; --resume refuses a run with
// another one, and reads a config.json written before the setting existed as exact.
TEST(Suite, RecordsPrefillAttentionAndResumeChecksIt) {
  const fs::path d = temp_dir("prefill_attn");
  EvalConfig cfg;
  cfg.model_path = (test::shared_dir() / "models" / "stories260K.gguf").string();
  cfg.tasks = {"fidelity"};
  cfg.lengths = {512};
  cfg.presses = {"streamingllm:budget=64"};
  cfg.samples = 1;
  cfg.seed = 5;
  cfg.chat = ChatMode::Off;
  cfg.threads = 2;
  EXPECT_EQ(cfg.prefill_attention, PrefillAttention::Exact);  // the default
  const SuiteResult r = run_suite(cfg, d.string(), false);
  EXPECT_EQ(r.records, 2);
  const fs::path cp = d / "config.json";
  auto read_config = [&] {
    std::ifstream in(cp);
    return nlohmann::json::parse(in);
  };
  auto write_config = [&](const nlohmann::json& j) { std::ofstream(cp, std::ios::trunc) << j.dump(2) << "\n"; };
  nlohmann::json cj = read_config();
  EXPECT_EQ(cj["prefill_attention"], "exact");
  // A config.json of an earlier version (no prefill_attention) resumes as exact.
  cj.erase("prefill_attention");
  write_config(cj);
  EXPECT_EQ(run_suite(cfg, d.string(), true).records, 0);
  EXPECT_EQ(read_config()["prefill_attention"], "exact");  // rewritten with the field
  // A run recorded as bf16 is not resumed with exact.
  cj["prefill_attention"] = "bf16";
  write_config(cj);
  try {
    (void)run_suite(cfg, d.string(), true);
    ADD_FAILURE() << "resumed a bf16 run with exact prefill attention";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("prefill_attention"), std::string::npos) << e.what();
  }
  // Nor an exact run with bf16 (where this build runs bf16; elsewhere loading the engine fails).
  cj["prefill_attention"] = "exact";
  write_config(cj);
  EvalConfig bf16 = cfg;
  bf16.prefill_attention = PrefillAttention::BF16;
  try {
    (void)run_suite(bf16, d.string(), true);
    ADD_FAILURE() << "resumed an exact run with bf16 prefill attention";
  } catch (const Error& e) {
    const std::string want = prefill_attention_supported(PrefillAttention::BF16) ? "prefill_attention" : "AVX512-BF16";
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
  // A bf16 run (stories260K's head_dim 8 runs the exact kernel) records bf16.
  if (prefill_attention_supported(PrefillAttention::BF16)) {
    const fs::path d2 = temp_dir("prefill_attn_bf16");
    EXPECT_EQ(run_suite(bf16, d2.string(), false).records, 2);
    std::ifstream in(d2 / "config.json");
    EXPECT_EQ(nlohmann::json::parse(in)["prefill_attention"], "bf16");
    fs::remove_all(d2);
  }
  // The values' types (--kv-type-v, and the reference's): recorded; a config.json of an earlier
  // version (one type) resumes, one whose values' or reference values' type differs does not.
  cj = read_config();
  EXPECT_EQ(cj["kv_type_v"], "f16");
  EXPECT_EQ(cj["reference_kv_type_v"], "f16");
  cj.erase("kv_type_v");
  cj.erase("reference_kv_type_v");
  write_config(cj);
  EXPECT_EQ(run_suite(cfg, d.string(), true).records, 0);
  for (const char* field : {"kv_type_v", "reference_kv_type_v"}) {
    nlohmann::json other = read_config();
    other[field] = "q4_0";
    write_config(other);
    try {
      (void)run_suite(cfg, d.string(), true);
      ADD_FAILURE() << "resumed a run of another " << field;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string(field) + " ="), std::string::npos) << e.what();
    }
    write_config(cj);
  }
  fs::remove_all(d);
}

}  // namespace
}  // namespace snapkv::eval
