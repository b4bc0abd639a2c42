// Streaming detokenization: multi-byte characters split over byte-fallback tokens come out whole;
// append_valid_utf8 follows Unicode's "maximal subpart" replacement.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "snapkv/error.h"
#include "snapkv/tokenizer.h"
#include "tok_test_util.h"

namespace snapkv {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

std::string valid(std::string_view s, bool hold, size_t* held = nullptr) {
  std::string out;
  const size_t h = append_valid_utf8(out, s, hold);
  if (held != nullptr) *held = h;
  return out;
}

TEST(AppendValidUtf8, CopiesWellFormedText) {
  const std::string s = "plain ASCII, Führer, нещо, 我想, 🦙🚀, \xF4\x8F\xBF\xBF";  // last: U+10FFFF
  EXPECT_EQ(valid(s, false), s);
  EXPECT_EQ(valid(s, true), s);
}

TEST(AppendValidUtf8, ReplacesMaximalSubparts) {
  EXPECT_EQ(valid("a\xFF"
                  "b",
                  false),
            "a" + kFffd + "b");
  EXPECT_EQ(valid("\xC0\x80", false), kFffd + kFffd);              // overlong: C0 is never valid
  EXPECT_EQ(valid("\xED\xA0\x80", false), kFffd + kFffd + kFffd);  // surrogate U+D800
  EXPECT_EQ(valid("\xE2\x82"
                  "A",
                  false),
            kFffd + "A");                                                      // truncated 3-byte form: one U+FFFD
  EXPECT_EQ(valid("\xF4\x90\x80\x80", false), kFffd + kFffd + kFffd + kFffd);  // above U+10FFFF
  EXPECT_EQ(valid("\x80\x80", false), kFffd + kFffd);                          // stray continuation bytes
}

TEST(AppendValidUtf8, HoldsBackAnIncompleteTail) {
  size_t held = 0;
  EXPECT_EQ(valid("ab\xF0\x9F\xA6", true, &held), "ab");
  EXPECT_EQ(held, 3u);
  EXPECT_EQ(valid("ab\xF0\x9F\xA6", false, &held), "ab" + kFffd);
  EXPECT_EQ(held, 0u);
  EXPECT_EQ(valid("\xC3", true, &held), "");
  EXPECT_EQ(held, 1u);
  // An invalid tail is not held: it can never become valid.
  EXPECT_EQ(valid("x\xF0\x20", true, &held), "x" + kFffd + " ");
  EXPECT_EQ(held, 0u);
}

class StreamSpm : public ::testing::Test {
 protected:
  const Tokenizer& tok() {
    return test::cached_tokenizer(test::shared_dir() / "tokenizers" / "ggml-vocab-llama-spm.gguf");
  }
};

TEST_F(StreamSpm, SplitCharactersComeOutWhole) {
  // 🦙 and the Khmer letters are not in the Llama vocabulary: they become <0xNN> byte tokens.
  const std::string text = "Hi 🦙 and កាន់ with Führer 😶\u200d🌫️!";
  const std::vector<int32_t> ids = tok().encode(text, false, false);
  int byte_tokens = 0;
  for (int32_t id : ids) byte_tokens += (tok().token_attr(id) & kTokenAttrByte) ? 1 : 0;
  ASSERT_GE(byte_tokens, 8);  // the test needs characters split over several tokens

  TokenStreamDecoder dec(tok());
  std::string streamed;
  int empty_pushes = 0;
  for (int32_t id : ids) {
    const std::string part = dec.push(id);
    EXPECT_EQ(valid(part, false), part) << "push() returned invalid UTF-8 for token " << id;
    empty_pushes += part.empty() ? 1 : 0;
    streamed += part;
  }
  streamed += dec.flush();
  EXPECT_GT(empty_pushes, 0);          // partial characters were held back
  EXPECT_EQ(streamed, " " + text);     // no leading-space strip in a stream
  EXPECT_EQ(tok().decode(ids), text);  // decode strips the space prefix
}

TEST_F(StreamSpm, FlushReplacesAnUnfinishedCharacter) {
  const int32_t f0 = tok().find_token("<0xF0>");
  const int32_t x9f = tok().find_token("<0x9F>");
  ASSERT_GE(f0, 0);
  ASSERT_GE(x9f, 0);
  TokenStreamDecoder dec(tok());
  EXPECT_EQ(dec.push(tok().find_token("▁hello")), " hello");
  EXPECT_EQ(dec.push(f0), "");
  EXPECT_EQ(dec.push(x9f), "");
  EXPECT_EQ(dec.flush(), kFffd);
  EXPECT_EQ(dec.flush(), "");  // reset
  EXPECT_EQ(dec.push(f0), "");
  EXPECT_EQ(dec.push(tok().find_token("▁a")), kFffd + " a");  // the sequence is broken: replaced at once
}

TEST_F(StreamSpm, ControlTokensAreHiddenUnlessRendered) {
  TokenStreamDecoder plain(tok());
  TokenStreamDecoder rendered(tok(), /*render_special=*/true);
  EXPECT_EQ(plain.push(tok().eos()), "");
  EXPECT_EQ(rendered.push(tok().eos()), "</s>");
  EXPECT_THROW(plain.push(tok().n_vocab()), Error);
}

}  // namespace
}  // namespace snapkv
