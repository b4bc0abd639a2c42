// decode(encode(s)) == s on llama.cpp's hard strings, for the vocabularies that are lossless on them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "snapkv/tokenizer.h"
#include "tok_test_util.h"

namespace snapkv {
namespace {

class RoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(RoundTrip, DecodeOfEncodeIsIdentity) {
  const std::string name = GetParam();
  const Tokenizer& tok = test::cached_tokenizer(test::shared_dir() / "tokenizers" / ("ggml-vocab-" + name + ".gguf"));
  const auto cases = test::load_vocab_cases(name);
  ASSERT_EQ(cases.size(), 46u);
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string& s = cases[i].text;
    EXPECT_EQ(tok.decode(cases[i].ids), s) << name << " case " << i;
    EXPECT_EQ(tok.decode(tok.encode(s, false, false)), s) << name << " case " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Shared, RoundTrip,
                         ::testing::Values("llama-spm", "phi-3", "gpt-2", "deepseek-coder", "mpt", "falcon"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string n = p.param;
                           for (char& c : n) {
                             if (c == '-') c = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace snapkv

namespace snapkv {
namespace {

/// Arbitrary bytes (deterministic): never a crash or an exception, and ids in range. (Not a round
/// trip: as in llama.cpp, an invalid lead byte can swallow part of an escaped space.)
TEST(ArbitraryBytes, EncodeIsTotal) {
  uint64_t state = 0x9E3779B97F4A7C15ull;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint8_t>(state >> 56);
  };
  for (const char* name : {"llama-spm", "gpt-2", "deepseek-coder", "falcon", "mpt"}) {
    const Tokenizer& tok =
        test::cached_tokenizer(test::shared_dir() / "tokenizers" / (std::string("ggml-vocab-") + name + ".gguf"));
    for (int round = 0; round < 50; ++round) {
      std::string s;
      const int len = next() % 40;
      for (int i = 0; i < len; ++i) s.push_back(static_cast<char>(next()));
      s += "\xF4\x90\x80\x80\xF7\xBF\xBF\xBF\xED\xA0\x80";  // above U+10FFFF and a surrogate
      std::vector<int32_t> ids;
      ASSERT_NO_THROW(ids = tok.encode(s, true, true)) << name;
      for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok.n_vocab()) << name;
      ASSERT_NO_THROW(tok.decode(ids, true)) << name;
    }
  }
}

}  // namespace
}  // namespace snapkv
