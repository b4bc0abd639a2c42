// Token ids and pieces from llama.cpp's golden runs of the shared tiny models
// (../shared/models/golden/*/kv_f32/golden.json: prompts tokenized with add_special=true,
// parse_special=false, so BOS is prepended; pieces rendered with special tokens).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "snapkv/tokenizer.h"
#include "tok_test_util.h"

namespace snapkv {
namespace {

using nlohmann::json;

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

class GoldenModels : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    g_ = json::parse(test::read_file(test::shared_dir() / "models" / "golden" / GetParam() / "kv_f32" / "golden.json"));
    tok_ = &test::cached_tokenizer(test::shared_dir() / "models" / g_["model_file"].get<std::string>());
  }
  const Tokenizer& tok() const { return *tok_; }
  const json& golden() const { return g_; }

 private:
  json g_;
  const Tokenizer* tok_ = nullptr;
};

TEST_P(GoldenModels, VocabularyMetadata) {
  const json& g = golden();
  EXPECT_EQ(tok().n_vocab(), g["n_vocab"].get<int32_t>());
  EXPECT_EQ(tok().bos(), g["bos_id"].get<int32_t>());
  EXPECT_EQ(tok().eos(), g["eos_id"].get<int32_t>());
  EXPECT_EQ(tok().add_bos(), g["add_bos"].get<bool>());
  EXPECT_TRUE(tok().add_space_prefix());  // SPM default (no key in these files)
  EXPECT_TRUE(tok().is_eog(tok().eos()));
  EXPECT_FALSE(tok().is_eog(tok().bos()));
}

TEST_P(GoldenModels, PromptTokenIds) {
  const json& g = golden();
  ASSERT_EQ(g["prompts"].size(), 3u);
  for (const auto& p : g["prompts"]) {
    SCOPED_TRACE(p["name"].get<std::string>());
    const auto want = p["token_ids"].get<std::vector<int32_t>>();
    ASSERT_EQ(want.size(), p["n_tokens"].get<size_t>());
    EXPECT_EQ(tok().encode(p["text"].get<std::string>(), /*add_special=*/true, /*parse_special=*/false), want);
  }
}

TEST_P(GoldenModels, PiecesOfPromptAndGreedyTokens) {
  const json& g = golden();
  for (const auto& p : g["prompts"]) {
    SCOPED_TRACE(p["name"].get<std::string>());
    const auto ids = p["token_ids"].get<std::vector<int32_t>>();
    const auto pieces = p["token_pieces"].get<std::vector<std::string>>();
    ASSERT_EQ(ids.size(), pieces.size());
    for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(tok().token_to_piece(ids[i], true), pieces[i]) << "token " << i;
    const auto gen = p["greedy_token_ids"].get<std::vector<int32_t>>();
    const auto gen_pieces = p["greedy_pieces"].get<std::vector<std::string>>();
    ASSERT_EQ(gen.size(), gen_pieces.size());
    std::string bytes;
    for (size_t i = 0; i < gen.size(); ++i) {
      const std::string piece = tok().token_to_piece(gen[i], true);
      EXPECT_EQ(piece, gen_pieces[i]) << "greedy token " << i;
      bytes += piece;
    }
    EXPECT_EQ(bytes, from_hex(p["greedy_text_hex"].get<std::string>()));
  }
}

TEST_P(GoldenModels, StreamDecoderGivesTheGreedyText) {
  const json& g = golden();
  for (const auto& p : g["prompts"]) {
    SCOPED_TRACE(p["name"].get<std::string>());
    TokenStreamDecoder dec(tok(), /*render_special=*/true);
    std::string text;
    for (int32_t id : p["greedy_token_ids"].get<std::vector<int32_t>>()) text += dec.push(id);
    text += dec.flush();
    std::string want;
    append_valid_utf8(want, from_hex(p["greedy_text_hex"].get<std::string>()), false);
    EXPECT_EQ(text, want);
  }
}

TEST_P(GoldenModels, DecodeRoundTripsThePrompts) {
  const json& g = golden();
  for (const auto& p : g["prompts"]) {
    const std::string text = p["text"].get<std::string>();
    EXPECT_EQ(tok().decode(tok().encode(text, false, false)), text);
    // With BOS first, llama.cpp keeps the space the prefix added (the BOS piece takes the strip).
    EXPECT_EQ(tok().decode(tok().encode(text, true, false)), " " + text);
  }
}

INSTANTIATE_TEST_SUITE_P(Shared, GoldenModels, ::testing::Values("stories260K", "llama-2-tiny-random"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           return p.param == "stories260K" ? std::string("stories260K") : std::string("tiny_random");
                         });

}  // namespace
}  // namespace snapkv
