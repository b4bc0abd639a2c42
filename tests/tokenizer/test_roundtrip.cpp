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
