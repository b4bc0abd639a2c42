// End to end (issue 10): several --question on one compressed document, with and without a cold
// tier. Each question is answered from the same compressed document (a fork), so a question's
// answer does not depend on the others; --cold-tier re-selects the hot entries per question.
// --save-session / --load-session: a context saved by one process answers questions in another
// exactly as one process answers them; on SmolLM2 (chat), a saved document with two numbers
// answers both questions with re-selection, while plain SnapKV's one selection loses them.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "snapkv/snapkv.h"

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

/// A path in the temp dir for this test's session file (removed by the caller).
std::filesystem::path session_path(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("snapkv_cli_" + std::to_string(::getpid()) + "_" + name + ".snkv");
}

TEST(CliFollowUp, SavedSessionAnswersAsOneProcessDoes) {
  const auto file = session_path("stories");
  const json one =
      run_json({"--question", "What did Lily kick?", "--question", "Who gave her a cookie?", "--cold-tier", "int8"});
  const json saved = run_json({"--cold-tier", "int8", "--save-session", file.string()});
  EXPECT_EQ(saved["session"], file.string());
  EXPECT_TRUE(saved["compressed"].get<bool>());
  EXPECT_GT(saved["compression_ms"].get<double>(), 0.0);  // the press ran (bench_kv --decode-reps reads it)
  EXPECT_LT(saved["compression_ms"].get<double>(), saved["prefill_ms"].get<double>());
  EXPECT_GT(saved["kv_cold_bytes"].get<size_t>(), 0u);
  EXPECT_EQ(saved["session_bytes"].get<size_t>(), std::filesystem::file_size(file));
  const auto r =
      run_cli({"run", "-m", stories(), "--load-session", file.string(), "--question", "What did Lily kick?",
               "--question", "Who gave her a cookie?", "-n", "10", "--temp", "0", "--ignore-eos", "-t", "2", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const json loaded = json::parse(r.out);
  ASSERT_EQ(loaded["answers"].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(loaded["answers"][i]["generated_token_ids"], one["answers"][i]["generated_token_ids"]) << i;
    EXPECT_EQ(loaded["answers"][i]["kv_cache_bytes"], one["answers"][i]["kv_cache_bytes"]) << i;
  }
  EXPECT_EQ(loaded["kv_cold_bytes"], one["kv_cold_bytes"]);
  EXPECT_EQ(loaded["press_spec"], one["press_spec"]);
  EXPECT_EQ(loaded["cold_tier"], "int8");
  EXPECT_GT(loaded["session_load_ms"].get<double>(), 0.0);

  // Misuse: a document or a press with --load-session, no question, another model's file, a
  // damaged file.
  auto err = [&](std::vector<std::string> args, const std::string& needle) {
    const auto e = run_cli(args);
    EXPECT_EQ(e.rc, 1) << needle;
    EXPECT_NE(e.err.find(needle), std::string::npos) << e.err;
  };
  err({"run", "-m", stories(), "--load-session", file.string(), "-p", "x", "--question", "Q"}, "only --question");
  err({"run", "-m", stories(), "--load-session", file.string(), "--press", "tova", "--question", "Q"},
      "the press and its settings are the saved session's; drop --press");
  // Press settings and KV types given beside a session are named, never silently ignored (nor
  // answered with advice to add a --press that would be refused in turn).
  err({"run", "-m", stories(), "--load-session", file.string(), "--budget", "40", "--question", "Q"}, "drop --budget");
  err({"run", "-m", stories(), "--load-session", file.string(), "--window", "4", "--span-gap", "2", "--question", "Q"},
      "drop --window, --span-gap");
  err({"run", "-m", stories(), "--load-session", file.string(), "--kv-type", "f32", "--question", "Q"},
      "the KV types are the saved session's; drop --kv-type");
  err({"run", "-m", stories(), "--load-session", file.string(), "--kv-type-v", "q4_0", "--question", "Q"},
      "the KV types are the saved session's; drop --kv-type-v");
  err({"run", "-m", stories(), "--load-session", file.string(), "--compression-ratio", "0.5", "--question", "Q"},
      "drop --compression-ratio");
  err({"run", "-m", stories(), "--load-session", file.string(), "--press", "none", "--question", "Q"}, "drop --press");
  err({"run", "-m", stories(), "--load-session", file.string(), "--dump-kept", "kept.json", "--question", "Q"},
      "drop --dump-kept");
  err({"run", "-m", stories(), "--load-session", file.string(), "--chat", "--question", "Q"},
      "saved as plain text, not a chat");
  err({"run", "-m", stories(), "--load-session", file.string()}, "give --question");
  err({"run", "-m", stories(), "--load-session", file.string(), "--cold-tier", "f16", "--question", "Q"}, "disk:DIR");
  err({"run", "-m", (shared_dir() / "models" / "llama-2-tiny-random.gguf").string(), "--load-session", file.string(),
       "--question", "Q"},
      "another model");
  std::filesystem::resize_file(file, std::filesystem::file_size(file) - 7);
  err({"run", "-m", stories(), "--load-session", file.string(), "--question", "Q"}, "damaged");
  std::filesystem::remove(file);
}

TEST(CliFollowUp, SaveSessionTargetsAreCheckedBeforeTheWork) {
  // Refused before the prefill, and nothing at the path is replaced: a file this run reads, a
  // FIFO, a symbolic link, the model. A session saved without a cold tier loaded with --cold-tier
  // disk:DIR names the flag instead of ignoring it.
  const auto dir = std::filesystem::temp_directory_path() / ("snapkv_cli_targets_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto doc = dir / "doc.txt";
  {
    std::FILE* f = std::fopen(doc.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(kDocument.c_str(), f);
    std::fclose(f);
  }
  auto save_to = [&](const std::filesystem::path& target) {
    return run_cli({"run", "-m", stories(), "-f", doc.string(), "-n", "2", "--save-session", target.string()});
  };
  auto r = save_to(doc);
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("is the file given with -f"), std::string::npos) << r.err;
  EXPECT_EQ(std::filesystem::file_size(doc), kDocument.size());
  const auto fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  r = save_to(fifo);
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("not a regular file (a FIFO)"), std::string::npos) << r.err;
  EXPECT_TRUE(std::filesystem::is_fifo(fifo));
  const auto link = dir / "link.snkv";
  std::filesystem::create_symlink(doc, link);
  r = save_to(link);
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("is a symbolic link"), std::string::npos) << r.err;
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  // The model, on a copy of it (were the check to fail, only the copy would be replaced).
  const auto model_copy = dir / "model.gguf";
  std::filesystem::copy_file(stories(), model_copy);
  r = run_cli({"run", "-m", model_copy.string(), "-f", doc.string(), "-n", "2", "--save-session", model_copy.string()});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("is the model file"), std::string::npos) << r.err;
  EXPECT_EQ(std::filesystem::file_size(model_copy), std::filesystem::file_size(stories()));
  r = save_to(dir / "no" / "such" / "dir.snkv");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("cannot create it"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("prefill"), std::string::npos) << r.err;
  // A 250-byte file name (the temporary file's name is not built from it).
  const auto long_name = dir / (std::string(245, 'c') + ".snkv");
  r = save_to(long_name);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(std::filesystem::is_regular_file(long_name));
  r = run_cli({"run", "-m", stories(), "--load-session", long_name.string(), "--question", "Q", "-n", "2",
               "--cold-tier", "disk:" + dir.string()});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("saved without a cold tier"), std::string::npos) << r.err;
  std::filesystem::remove_all(dir);
}

TEST(CliFollowUp, ALoadedSessionsPromptRecordIsChecked) {
  // The prompt record --save-session writes (the session's app data) edited by hand, the file's
  // checksum made right again: badly typed fields, or a context length other than the session's
  // positions (a file claiming ~2^30 positions once made the CLI fill a 4 GB placeholder), are
  // clear errors; the record as written answers.
  const auto engine = Engine::load(stories(), EngineOptions{});
  Workspace ws(*engine);
  auto seq = engine->new_sequence(SequenceOptions{});
  const std::vector<int32_t> ids = engine->tokenizer().encode(kDocument, true, false);
  engine->prefill(*seq, ids, PrefillOptions{}, ws);
  const auto file = session_path("record");
  auto load_with = [&](const json& record) {
    save_session(*engine, *seq, file.string(), record.dump());
    return run_cli({"run", "-m", stories(), "--load-session", file.string(), "--question", "Who?", "-n", "2", "--temp",
                    "0", "-t", "1", "--json"});
  };
  const json good = {{"kind", "snapkv run"}, {"chat", false}, {"messages", ""}, {"n_context_tokens", ids.size()}};
  const auto ok = load_with(good);
  ASSERT_EQ(ok.rc, 0) << ok.err;
  EXPECT_EQ(json::parse(ok.out)["n_context_tokens"], ids.size());
  auto damaged = [&](json record, const std::string& needle) {
    const auto r = load_with(record);
    EXPECT_EQ(r.rc, 1) << record.dump();
    EXPECT_NE(r.err.find("prompt record is damaged"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  };
  json bad = good;
  bad["chat"] = "yes";
  damaged(bad, "boolean");
  bad = good;
  bad["messages"] = 5;
  damaged(bad, "string");
  bad = good;
  bad["n_context_tokens"] = ids.size() + 1;
  damaged(bad, fmt::format("a context of {} tokens; the session holds {}", ids.size() + 1, ids.size()));
  bad = good;
  bad["n_context_tokens"] = 1.5;
  damaged(bad, "n_context_tokens 1.5");
  json no_count = good;  // a record without the count (hand-made) still loads
  no_count.erase("n_context_tokens");
  const auto loads = load_with(no_count);
  EXPECT_EQ(loads.rc, 0) << loads.err;
  bad = good;
  bad["kind"] = 7;
  const auto other = load_with(bad);
  EXPECT_EQ(other.rc, 1);
  EXPECT_NE(other.err.find("no prompt record"), std::string::npos) << other.err;
  std::filesystem::remove(file);
}

TEST(CliFollowUp, SmolLM2SavedDocumentAnswersBothNumbersWithReselection) {
  if (!std::filesystem::exists(smollm2_path()))
    GTEST_SKIP() << "SmolLM2 model missing: run scripts/get-model.sh smollm2";
  std::string doc;
  for (int i = 0; i < 60; ++i) {
    doc += "The grass is green. The sky is blue. The sun is yellow. Here we go. ";
    if (i == 15) doc += "The special magic number for river is 4817265. ";
    if (i == 45) doc += "The special magic number for mountain is 9034512. ";
  }
  const std::string q1 = "What is the special magic number for river?";
  const std::string q2 = "What is the special magic number for mountain?";
  const auto file = session_path("smollm2");
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"run", "-m",    smollm2_path().string(), "-n", "12", "--temp", "0", "-t",
                                     "2",   "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_cli(args);
    EXPECT_EQ(r.rc, 0) << r.err;
    return r.rc == 0 ? json::parse(r.out) : json::object();
  };
  const std::vector<std::string> press = {"--press", "snapkv", "--budget", "128"};
  auto with = [&](std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  run(with({"--chat", "-p", doc, "--cold-tier", "int8", "--save-session", file.string()}, press));
  const json loaded = run({"--load-session", file.string(), "--question", q1, "--question", q2});
  const json plain = run(with({"--chat", "-p", doc, "--question", q1, "--question", q2}, press));
  const json one = run(with({"--chat", "-p", doc, "--cold-tier", "int8", "--question", q1, "--question", q2}, press));
  ASSERT_EQ(one["answers"].size(), 2u);
  // The loaded session answers exactly as one process does (the chat prompt is re-rendered from
  // the saved conversation).
  for (size_t i = 0; i < 2; ++i)
    EXPECT_EQ(loaded["answers"][i]["generated_token_ids"], one["answers"][i]["generated_token_ids"]) << i;
  // Another template renders the saved conversation differently: refused.
  const auto r = run_cli({"run", "-m", smollm2_path().string(), "--load-session", file.string(), "--chat-template",
                          "gemma", "--question", q1});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("renders the saved conversation differently"), std::string::npos) << r.err;
  ASSERT_EQ(loaded["answers"].size(), 2u);
  ASSERT_EQ(plain["answers"].size(), 2u);
  // 12 greedy tokens: "The special magic number for river is 4817" — the digits come one by one.
  EXPECT_NE(loaded["answers"][0]["text"].get<std::string>().find("4817"), std::string::npos) << loaded["answers"][0];
  EXPECT_NE(loaded["answers"][1]["text"].get<std::string>().find("9034"), std::string::npos) << loaded["answers"][1];
  EXPECT_EQ(plain["answers"][0]["text"].get<std::string>().find("4817"), std::string::npos) << plain["answers"][0];
  EXPECT_EQ(plain["answers"][1]["text"].get<std::string>().find("9034"), std::string::npos) << plain["answers"][1];
  EXPECT_EQ(loaded["kv_cache_bytes"], plain["kv_cache_bytes"]);  // the same hot budget
  std::filesystem::remove(file);
}

}  // namespace
}  // namespace snapkv::test
