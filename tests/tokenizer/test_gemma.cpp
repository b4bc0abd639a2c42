// Gemma 3 (SPM, 262144 tokens, no space prefix, byte fallback, user-defined whitespace/HTML tokens)
// against llama.cpp's ids: tests/data/tokenizer/gemma3_tokens.json (tools/make_tokenizer_golden.py,
// llama-cpp-python 0.3.16) and the prompts of tests/data/gemma3-270m/kv_f32/golden.json.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "snapkv/chat.h"
#include "snapkv/error.h"
#include "snapkv/tokenizer.h"
#include "tok_test_util.h"

namespace snapkv {
namespace {

using nlohmann::json;

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

class Gemma : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(test::gemma_path())) {
      GTEST_SKIP() << "Gemma 3 model not found at " << test::gemma_path() << " (run scripts/get-model.sh)";
    }
    tok_ = &test::cached_tokenizer(test::gemma_path());
  }
  const Tokenizer* tok_ = nullptr;
};

TEST_F(Gemma, Metadata) {
  EXPECT_EQ(tok_->n_vocab(), 262144);
  EXPECT_EQ(tok_->type(), VocabType::SPM);
  EXPECT_EQ(tok_->bos(), 2);
  EXPECT_EQ(tok_->eos(), 1);
  EXPECT_EQ(tok_->unk(), 3);
  EXPECT_EQ(tok_->pad(), 0);
  EXPECT_EQ(tok_->eot(), 106);  // <end_of_turn>, found by its text (no eot key in the file)
  EXPECT_TRUE(tok_->add_bos());
  EXPECT_FALSE(tok_->add_eos());
  EXPECT_FALSE(tok_->add_space_prefix());
  EXPECT_TRUE(tok_->is_eog(1));
  EXPECT_TRUE(tok_->is_eog(106));
  EXPECT_FALSE(tok_->is_eog(105));
  EXPECT_FALSE(tok_->is_eog(2));
  EXPECT_EQ(tok_->token_text(105), "<start_of_turn>");
  EXPECT_EQ(tok_->find_token("<end_of_turn>"), 106);
  EXPECT_EQ(tok_->find_token("no such token, surely"), -1);
}

TEST_F(Gemma, MatchesLlamaCppPeer) {
  const json doc = json::parse(test::read_file(test::source_dir() / "tests/data/tokenizer/gemma3_tokens.json"));
  ASSERT_GE(doc["cases"].size(), 20u);
  for (const auto& c : doc["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const std::string text = from_hex(c["hex"].get<std::string>());
    const auto want = c["token_ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok_->encode(text, c["add_bos"].get<bool>(), c["parse_special"].get<bool>()), want);
  }
}

TEST_F(Gemma, MatchesEngineGoldenPrompts) {
  const json doc = json::parse(test::read_file(test::source_dir() / "tests/data/gemma3-270m/kv_f32/golden.json"));
  ASSERT_EQ(doc["prompts"].size(), 5u);
  for (const auto& p : doc["prompts"]) {
    SCOPED_TRACE(p["name"].get<std::string>());
    const auto want = p["token_ids"].get<std::vector<int32_t>>();
    const auto got =
        tok_->encode(p["text"].get<std::string>(), p["add_bos"].get<bool>(), p["parse_special"].get<bool>());
    EXPECT_EQ(got.size(), p["n_prompt_tokens"].get<size_t>());
    EXPECT_EQ(got, want);
  }
}

TEST_F(Gemma, ChatFormatGivesTheGoldenChatPrompt) {
  const json doc = json::parse(test::read_file(test::source_dir() / "tests/data/gemma3-270m/kv_f32/golden.json"));
  const json* chat = nullptr;
  for (const auto& p : doc["prompts"]) {
    if (p["name"] == "chat_boiling") chat = &p;
  }
  ASSERT_NE(chat, nullptr);
  const GGUFFile f = GGUFFile::open(test::gemma_path().string());
  EXPECT_EQ(detect_chat_format(f), ChatFormat::Gemma);  // no tokenizer.chat_template: by architecture
  const std::vector<ChatMessage> msgs = {{"user", "What is the boiling point of water in Celsius?"}};
  const std::string prompt = format_chat(ChatFormat::Gemma, msgs, /*add_generation_prompt=*/true);
  EXPECT_EQ(prompt, (*chat)["text"].get<std::string>());
  EXPECT_EQ(tok_->encode(prompt, true, true), (*chat)["token_ids"].get<std::vector<int32_t>>());
}

TEST_F(Gemma, RoundTripsValidText) {
  const json doc = json::parse(test::read_file(test::source_dir() / "tests/data/tokenizer/gemma3_tokens.json"));
  for (const auto& c : doc["cases"]) {
    if (c["name"] == "invalid_utf8") continue;  // invalid bytes come back as they were, checked below
    SCOPED_TRACE(c["name"].get<std::string>());
    const std::string text = from_hex(c["hex"].get<std::string>());
    const bool special = c["parse_special"].get<bool>();
    // Control tokens parsed from the text only come back when rendered.
    EXPECT_EQ(tok_->decode(tok_->encode(text, false, special), /*render_special=*/special), text);
  }
  const std::string bad =
      "ab\xff"
      "cd\xc3 e\x80"
      "f \xe2\x82";
  EXPECT_EQ(tok_->decode(tok_->encode(bad, false, false)), bad);  // byte fallback keeps every byte
}

TEST_F(Gemma, UserDefinedTokensAreSplitEvenWithoutParseSpecial) {
  // As llama.cpp (checked against the peer data above): user-defined texts such as "\n", runs of
  // spaces and HTML tags are split out first; control texts such as <end_of_turn> only with
  // parse_special.
  const std::vector<int32_t> ids = tok_->encode("<b>x</b>\n\n  y<end_of_turn>", false, false);
  EXPECT_NE(std::find(ids.begin(), ids.end(), 200), ids.end());  // <b>
  EXPECT_NE(std::find(ids.begin(), ids.end(), 209), ids.end());  // </b>
  EXPECT_NE(std::find(ids.begin(), ids.end(), 108), ids.end());  // "\n\n"
  EXPECT_NE(std::find(ids.begin(), ids.end(), 138), ids.end());  // "  "
  EXPECT_EQ(std::find(ids.begin(), ids.end(), 106), ids.end());
  const std::vector<int32_t> sp = tok_->encode("y<end_of_turn>", false, true);
  EXPECT_EQ(sp.back(), 106);
}

TEST_F(Gemma, PiecesOfSpecialTokens) {
  EXPECT_EQ(tok_->token_to_piece(106), "");  // control: hidden unless rendered
  EXPECT_EQ(tok_->token_to_piece(106, true), "<end_of_turn>");
  EXPECT_EQ(tok_->token_to_piece(107), "\n");  // user-defined: its text
  EXPECT_EQ(tok_->token_to_piece(138), "  ");
  EXPECT_EQ(tok_->token_to_piece(168), "<table>");
  EXPECT_THROW(tok_->token_to_piece(262144), Error);
  EXPECT_THROW(tok_->token_to_piece(-1), Error);
}

TEST_F(Gemma, LongTextIsFast) {
  const std::filesystem::path gpl = "/usr/share/common-licenses/GPL-3";
  if (!std::filesystem::exists(gpl)) GTEST_SKIP() << gpl << " not present";
  const std::string text = test::read_file(gpl);
  ASSERT_GT(text.size(), 30000u);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = tok_->encode(text, true, false);
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  RecordProperty("gpl3_encode_ms", std::to_string(sec * 1e3));
  std::printf("GPL-3 (%zu bytes) -> %zu tokens in %.1f ms\n", text.size(), ids.size(), sec * 1e3);
#if defined(__SANITIZE_ADDRESS__)
  EXPECT_LT(sec, 3.0);  // instrumented build
#else
  EXPECT_LT(sec, 0.5);  // measured ~35 ms
#endif
  EXPECT_GT(ids.size(), 7000u);
  EXPECT_EQ(tok_->decode(std::span(ids).subspan(1)), text);
}

}  // namespace
}  // namespace snapkv
