// Bad tokenizer metadata throws snapkv::Error with one line naming the file, the key and the value.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "snapkv/error.h"
#include "snapkv/tokenizer.h"
#include "synthetic_vocab.h"

namespace snapkv {
namespace {

using test::SynTok;

/// The message of the Error thrown by loading `image` as "bad.gguf" ("" if none).
std::string load_error(const std::vector<uint8_t>& image) {
  try {
    test::make_tokenizer(image, "bad.gguf");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_error(const std::vector<uint8_t>& image, const std::vector<std::string>& parts) {
  const std::string msg = load_error(image);
  ASSERT_FALSE(msg.empty()) << "no Error thrown";
  EXPECT_EQ(msg.rfind("bad.gguf", 0), 0u) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
}

TEST(TokenizerLoad, MissingModelKey) {
  GGUFWriter w;
  w.add_string_array("tokenizer.ggml.tokens", {"a"});
  expect_error(w.to_bytes(), {"tokenizer.ggml.model"});
}

TEST(TokenizerLoad, UnsupportedModel) { expect_error(test::vocab_gguf("bert", {{"a"}}), {"'bert'"}); }

TEST(TokenizerLoad, MissingTokens) {
  GGUFWriter w;
  w.add_string("tokenizer.ggml.model", "llama");
  expect_error(w.to_bytes(), {"tokenizer.ggml.tokens"});
}

TEST(TokenizerLoad, ShortScoresAndTypes) {
  GGUFWriter w;
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>"});
  w.add_f32_array("tokenizer.ggml.scores", {0.0f, 0.0f});
  expect_error(w.to_bytes(), {"tokenizer.ggml.scores", "2", "3"});
  GGUFWriter v;
  v.add_string("tokenizer.ggml.model", "llama");
  v.add_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>"});
  v.add_i32_array("tokenizer.ggml.token_type", {2, 3});
  expect_error(v.to_bytes(), {"tokenizer.ggml.token_type"});
}

TEST(TokenizerLoad, UnsupportedPreTokenizer) {
  expect_error(test::vocab_gguf("gpt2", {{"a"}},
                                [](GGUFWriter& w) {
                                  w.add_string("tokenizer.ggml.pre", "nonesuch");
                                  w.add_string_array("tokenizer.ggml.merges", {});
                                }),
               {"'nonesuch'", "tokenizer.ggml.pre"});
}

TEST(TokenizerLoad, BpeWithoutMerges) {
  expect_error(test::vocab_gguf("gpt2", {{"a"}}, [](GGUFWriter& w) { w.add_string("tokenizer.ggml.pre", "gpt-2"); }),
               {"tokenizer.ggml.merges"});
}

TEST(TokenizerLoad, TokenIdOfWrongType) {
  expect_error(test::vocab_gguf("llama", test::spm_base(),
                                [](GGUFWriter& w) { w.add_string("tokenizer.ggml.bos_token_id", "1"); }),
               {"tokenizer.ggml.bos_token_id", "string"});
}

TEST(TokenizerLoad, AddBosWithoutValidBos) {
  // One token only: the SPM default BOS id 1 is out of range and the key is out of range too.
  expect_error(test::vocab_gguf("llama", {{"a"}}, [](GGUFWriter& w) { w.add_u32("tokenizer.ggml.bos_token_id", 7); }),
               {"add_bos_token"});
}

TEST(TokenizerLoad, OutOfRangeIdsAreIgnored) {
  auto t = test::make_tokenizer(test::vocab_gguf("llama", test::spm_base(), [](GGUFWriter& w) {
    w.add_u32("tokenizer.ggml.eos_token_id", 99999);
    w.add_u32("tokenizer.ggml.padding_token_id", 0xFFFFFFFFu);
    w.add_i32("tokenizer.ggml.eot_token_id", -1);
  }));
  EXPECT_EQ(t->eos(), 2);  // default kept
  EXPECT_EQ(t->pad(), -1);
  EXPECT_EQ(t->eot(), -1);
  EXPECT_EQ(t->n_vocab(), 259);
  EXPECT_THROW(t->token_text(259), Error);
  EXPECT_THROW(t->token_text(-1), Error);
}

}  // namespace
}  // namespace snapkv
