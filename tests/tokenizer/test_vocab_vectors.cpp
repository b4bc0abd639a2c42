// llama.cpp's tokenizer test vectors (../shared/tokenizers): 46 hard strings per vocabulary, encoded
// with add_special=false, parse_special=false; every id must match.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "snapkv/tokenizer.h"
#include "tok_test_util.h"

namespace snapkv {
namespace {

constexpr int kCasesPerVocab = 46;

std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

class VocabVectors : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(VocabVectors, MatchesLlamaCpp) {
  const auto& [name, index] = GetParam();
  const auto path = test::shared_dir() / "tokenizers" / ("ggml-vocab-" + name + ".gguf");
  const Tokenizer& tok = test::cached_tokenizer(path);
  const std::vector<test::VocabCase> cases = test::load_vocab_cases(name);
  ASSERT_EQ(cases.size(), static_cast<size_t>(kCasesPerVocab));
  const test::VocabCase& c = cases[static_cast<size_t>(index)];
  EXPECT_EQ(tok.encode(c.text, /*add_special=*/false, /*parse_special=*/false), c.ids)
      << name << " case " << index << ": '" << printable(c.text) << "'";
}

INSTANTIATE_TEST_SUITE_P(Shared, VocabVectors,
                         ::testing::Combine(::testing::Values("llama-spm", "phi-3", "gpt-2", "deepseek-coder", "falcon",
                                                              "mpt"),
                                            ::testing::Range(0, kCasesPerVocab)),
                         [](const ::testing::TestParamInfo<VocabVectors::ParamType>& p) {
                           std::string n = std::get<0>(p.param);
                           for (char& ch : n) {
                             if (ch == '-') ch = '_';
                           }
                           return n + "_" + std::to_string(std::get<1>(p.param));
                         });

}  // namespace
}  // namespace snapkv
