// SmolLM2-135M-Instruct (byte-level BPE, 49152 tokens, pre-tokenizer "smollm", no BOS, ChatML)
// against llama.cpp's ids: tests/data/tokenizer/smollm2_tokens.json (tools/make_tokenizer_golden.py
// --model smollm2, llama-cpp-python 0.3.16) and the prompts of tests/data/smollm2-135m/kv_f32/golden.json.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "snapkv/chat.h"
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

json peer_doc() {
  return json::parse(test::read_file(test::source_dir() / "tests/data/tokenizer/smollm2_tokens.json"));
}

class SmolLM2Tok : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(test::smollm2_path())) {
      GTEST_SKIP() << "SmolLM2 model not found at " << test::smollm2_path() << " (run scripts/get-model.sh smollm2)";
    }
    tok_ = &test::cached_tokenizer(test::smollm2_path());
  }
  const Tokenizer* tok_ = nullptr;
};

TEST_F(SmolLM2Tok, Metadata) {
  EXPECT_EQ(tok_->n_vocab(), 49152);
  EXPECT_EQ(tok_->type(), VocabType::BPE);
  EXPECT_EQ(tok_->pre(), "smollm");
  EXPECT_EQ(tok_->bos(), 1);
  EXPECT_EQ(tok_->eos(), 2);
  EXPECT_EQ(tok_->unk(), 0);
  EXPECT_EQ(tok_->pad(), 2);
  EXPECT_FALSE(tok_->add_bos());  // tokenizer.ggml.add_bos_token = false
  EXPECT_FALSE(tok_->add_eos());
  EXPECT_EQ(tok_->token_text(0), "<|endoftext|>");
  EXPECT_EQ(tok_->token_text(1), "<|im_start|>");
  EXPECT_EQ(tok_->token_text(2), "<|im_end|>");
  EXPECT_TRUE(tok_->is_eog(2));   // <|im_end|> = eos: the end of an assistant turn
  EXPECT_TRUE(tok_->is_eog(0));   // <|endoftext|>, by its text, as llama.cpp
  EXPECT_FALSE(tok_->is_eog(1));  // <|im_start|>
}

TEST_F(SmolLM2Tok, MatchesLlamaCppPeer) {
  const json doc = peer_doc();
  ASSERT_GE(doc["cases"].size(), 30u);
  for (const auto& c : doc["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const std::string text = from_hex(c["hex"].get<std::string>());
    const auto want = c["token_ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok_->encode(text, c["add_bos"].get<bool>(), c["parse_special"].get<bool>()), want);
  }
}

// The demo's document, whole (7639 tokens: 8192 - 553 left for the chat turn, question and answer).
TEST_F(SmolLM2Tok, MatchesLlamaCppOnWholeFiles) {
  const json doc = peer_doc();
  ASSERT_TRUE(doc.contains("file_cases"));
  for (const auto& c : doc["file_cases"]) {
    const std::filesystem::path p = c["path"].get<std::string>();
    if (!std::filesystem::exists(p)) GTEST_SKIP() << p << " not present";
    SCOPED_TRACE(p.string());
    const std::string text = test::read_file(p);
    const auto want = c["token_ids"].get<std::vector<int32_t>>();
    const auto got = tok_->encode(text, c["add_bos"].get<bool>(), c["parse_special"].get<bool>());
    EXPECT_EQ(got.size(), c["n_tokens"].get<size_t>());
    EXPECT_EQ(got, want);
    EXPECT_EQ(tok_->decode(got), text);
  }
}

TEST_F(SmolLM2Tok, MatchesEngineGoldenPrompts) {
  const json doc = json::parse(test::read_file(test::source_dir() / "tests/data/smollm2-135m/kv_f32/golden.json"));
  ASSERT_EQ(doc["prompts"].size(), 3u);
  for (const auto& p : doc["prompts"]) {
    SCOPED_TRACE(p["name"].get<std::string>());
    const auto got =
        tok_->encode(p["text"].get<std::string>(), p["add_special"].get<bool>(), p["parse_special"].get<bool>());
    EXPECT_EQ(got.size(), p["n_prompt_tokens"].get<size_t>());
    EXPECT_EQ(got, p["token_ids"].get<std::vector<int32_t>>());
  }
}

TEST_F(SmolLM2Tok, ChatFormatGivesTheGoldenChatPrompt) {
  const json doc = json::parse(test::read_file(test::source_dir() / "tests/data/smollm2-135m/kv_f32/golden.json"));
  const json* chat = nullptr;
  for (const auto& p : doc["prompts"]) {
    if (p["name"] == "chat_boiling") chat = &p;
  }
  ASSERT_NE(chat, nullptr);
  const GGUFFile f = GGUFFile::open(test::smollm2_path().string());
  EXPECT_EQ(detect_chat_format(f), ChatFormat::ChatML);  // from tokenizer.chat_template
  const std::vector<ChatMessage> msgs = {{"user", "What is the boiling point of water in Celsius?"}};
  const std::string prompt = format_chat(ChatFormat::ChatML, msgs, /*add_generation_prompt=*/true);
  EXPECT_EQ(prompt, (*chat)["text"].get<std::string>());
  EXPECT_EQ(tok_->encode(prompt, true, true), (*chat)["token_ids"].get<std::vector<int32_t>>());
}

TEST_F(SmolLM2Tok, RoundTripsValidText) {
  const json doc = peer_doc();  // kept alive: a range-for over peer_doc()["cases"] would dangle
  for (const auto& c : doc["cases"]) {
    if (c["name"] == "invalid_utf8") continue;  // checked below
    SCOPED_TRACE(c["name"].get<std::string>());
    const std::string text = from_hex(c["hex"].get<std::string>());
    const bool special = c["parse_special"].get<bool>();
    // Byte-level BPE is lossless on valid UTF-8; control tokens parsed from the text only come
    // back when rendered.
    EXPECT_EQ(tok_->decode(tok_->encode(text, false, special), /*render_special=*/special), text);
  }
  // As llama.cpp (same ids, MatchesLlamaCppPeer): each invalid byte is read as U+FFFD.
  EXPECT_EQ(tok_->decode(tok_->encode("ab\xff"
                                      "cd",
                                      false, false)),
            "ab\xef\xbf\xbd"
            "cd");
}

TEST_F(SmolLM2Tok, DigitsAreSplitOneByOne) {
  const std::vector<int32_t> ids = tok_->encode("2024", false, false);
  ASSERT_EQ(ids.size(), 4u);
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(tok_->token_to_piece(ids[i]), std::string(1, "2024"[i]));
}

TEST_F(SmolLM2Tok, SpecialTokensOnlyWithParseSpecial) {
  const std::vector<int32_t> sp = tok_->encode("<|im_start|>user\nhi<|im_end|>", false, true);
  ASSERT_GE(sp.size(), 3u);
  EXPECT_EQ(sp.front(), 1);
  EXPECT_EQ(sp.back(), 2);
  const std::vector<int32_t> plain = tok_->encode("<|im_start|>user\nhi<|im_end|>", false, false);
  EXPECT_GT(plain.size(), sp.size());
  for (const int32_t id : plain) EXPECT_GT(id, 2);
  EXPECT_EQ(tok_->token_to_piece(2), "");  // control: hidden unless rendered
  EXPECT_EQ(tok_->token_to_piece(2, true), "<|im_end|>");
}

}  // namespace
}  // namespace snapkv
