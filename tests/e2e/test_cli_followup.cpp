// End to end (issue 10): several --question on one compressed document, with and without a cold
// tier. Each question is answered from the same compressed document (a fork), so a question's
// answer does not depend on the others; --cold-tier re-selects the hot entries per question.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_runner.h"

namespace snapkv::test {
namespace {

using nlohmann::json;

std::string stories() { return (shared_dir() / "models" / "stories260K.gguf").string(); }

const std::string kDocument =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun. One day, she saw a "
    "big red ball in the park. She ran to the ball and kicked it very hard. The ball flew over the fence and into "
    "the garden of an old man. The old man was grumpy and did not like children. Lily was scared, but she wanted her "
    "ball back. She knocked on the door and said sorry. The old man smiled and gave her the ball and a cookie.";

json run_json(std::vector<std::string> extra) {
  std::vector<std::string> args = {"run",      "-m",           stories(),  "-p", kDocument, "--press", "snapkv",
                                   "--budget", "24",           "--window", "4",  "-n",      "10",      "--temp",
                                   "0",        "--ignore-eos", "-t",       "2",  "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = run_cli(args);
  EXPECT_EQ(r.rc, 0) << r.err;
  return r.rc == 0 ? json::parse(r.out) : json::object();
}

TEST(CliFollowUp, EachQuestionIsAnsweredFromTheCompressedDocument) {
  const json both = run_json({"--question", "What did Lily kick?", "--question", "Who gave her a cookie?"});
  const json first = run_json({"--question", "What did Lily kick?"});
  const json second = run_json({"--question", "Who gave her a cookie?"});
  ASSERT_TRUE(both.contains("answers"));
  ASSERT_EQ(both["answers"].size(), 2u);
  EXPECT_EQ(both["answers"][0]["question"], "What did Lily kick?");
  EXPECT_EQ(both["answers"][1]["question"], "Who gave her a cookie?");
  // One question at a time gives the same tokens: no question sees another.
  EXPECT_EQ(both["answers"][0]["generated_token_ids"], first["answers"][0]["generated_token_ids"]);
  EXPECT_EQ(both["answers"][1]["generated_token_ids"], second["answers"][0]["generated_token_ids"]);
  // The top-level fields are the first question's, as a one-question run reports them.
  EXPECT_EQ(both["generated_token_ids"], first["generated_token_ids"]);
  EXPECT_EQ(both["text"], both["answers"][0]["text"]);
  EXPECT_TRUE(both["compressed"].get<bool>());
  EXPECT_EQ(both["cold_tier"], "off");
  EXPECT_EQ(both["kv_cold_bytes"], 0);
  EXPECT_EQ(both["answers"][1]["reselect_ms"], 0.0);
}

TEST(CliFollowUp, ColdTierReselectsPerQuestion) {
  const json plain = run_json({"--question", "What did Lily kick?", "--question", "Who gave her a cookie?"});
  const json cold =
      run_json({"--question", "What did Lily kick?", "--question", "Who gave her a cookie?", "--cold-tier", "int8"});
  ASSERT_EQ(cold["answers"].size(), 2u);
  EXPECT_EQ(cold["cold_tier"], "int8");
  // stories260K: 5 layers x 4 KV heads x (K + V) x n_context rows of 8 + 4 bytes.
  const size_t n_ctx = cold["n_context_tokens"].get<size_t>();
  EXPECT_EQ(cold["kv_cold_bytes"].get<size_t>(), size_t{5} * 4 * 2 * n_ctx * (8 + 4));
  for (size_t i = 0; i < 2; ++i) {
    const json& a = cold["answers"][i];
    EXPECT_GT(a["reselect_ms"].get<double>(), 0.0);
    EXPECT_EQ(a["kv_cold_bytes"], cold["kv_cold_bytes"]);
    // The hot cache has the same size with and without re-selection (same budget, same question).
    EXPECT_EQ(a["kv_cache_bytes"], plain["answers"][i]["kv_cache_bytes"]);
    EXPECT_EQ(a["generated_token_ids"].size(), 10u);
  }
}

TEST(CliFollowUp, BadColdTierSettingsAreClearErrors) {
  auto r = run_cli({"run", "-m", stories(), "-p", kDocument, "--press", "snapkv", "--budget", "24", "--window", "4",
                    "--cold-tier", "int8"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("--question"), std::string::npos) << r.err;
  r = run_cli({"run", "-m", stories(), "-p", kDocument, "--question", "Why?", "--cold-tier", "int4"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("'int4'"), std::string::npos) << r.err;
  r = run_cli({"run", "-m", stories(), "-p", kDocument, "--press", "snapkv", "--budget", "24", "--window", "4",
               "--question", "Why?", "--cold-tier", "disk:/nonexistent/dir"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("/nonexistent/dir"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace snapkv::test
