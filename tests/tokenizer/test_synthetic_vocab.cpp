// Targeted behaviours on tiny hand-made vocabularies: SPM score order and ties, byte fallback,
// space prefix, special / user-defined splitting and strip attributes; BPE merge ranks,
// pre-tokenizer words, ignore_merges, dropped bytes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "snapkv/tokenizer.h"
#include "synthetic_vocab.h"

namespace snapkv {
namespace {

using test::SynTok;
using Ids = std::vector<int32_t>;

/// SPM vocabulary: base (0..258) + `extra` tokens from id 259 on.
std::unique_ptr<Tokenizer> spm(const std::vector<SynTok>& extra, const std::function<void(GGUFWriter&)>& kv = {},
                               bool with_bytes = true) {
  std::vector<SynTok> t = test::spm_base(with_bytes);
  t.insert(t.end(), extra.begin(), extra.end());
  return test::make_tokenizer(test::vocab_gguf("llama", t, kv));
}

auto no_prefix = [](GGUFWriter& w) { w.add_bool("tokenizer.ggml.add_space_prefix", false); };

TEST(SyntheticSpm, HighestScoreMergesFirst) {
  // 259 a, 260 b, 261 c, 262 ab, 263 bc
  auto t = spm({{"a", -10}, {"b", -10}, {"c", -10}, {"ab", -2}, {"bc", -1}}, no_prefix);
  EXPECT_EQ(t->encode("abc", false, false), (Ids{259, 263}));
  auto u = spm({{"a", -10}, {"b", -10}, {"c", -10}, {"ab", -1}, {"bc", -2}}, no_prefix);
  EXPECT_EQ(u->encode("abc", false, false), (Ids{262, 261}));
}

TEST(SyntheticSpm, EqualScoresMergeLeftmostFirst) {
  auto t = spm({{"a", -10}, {"b", -10}, {"c", -10}, {"ab", -1}, {"bc", -1}}, no_prefix);
  EXPECT_EQ(t->encode("abc", false, false), (Ids{262, 261}));
  EXPECT_EQ(t->encode("abcbc", false, false), (Ids{262, 261, 263}));  // ab, c, bc
}

TEST(SyntheticSpm, MergesChainIntoLongerTokens) {
  auto t = spm({{"a", -10}, {"b", -10}, {"c", -10}, {"ab", -2}, {"bc", -1}, {"abc", -5}}, no_prefix);
  EXPECT_EQ(t->encode("abc", false, false), (Ids{264}));  // bc first, then a+bc = abc
  EXPECT_EQ(t->decode(Ids{264}), "abc");
}

TEST(SyntheticSpm, ByteFallbackAndUnknown) {
  auto t = spm({{"a", -1}}, no_prefix);
  EXPECT_EQ(t->encode("a\xC3\xA9", false, false), (Ids{259, 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(t->decode(t->encode("a\xC3\xA9", false, false)), "a\xC3\xA9");
  // Without byte tokens a missing character becomes <unk>, once per byte.
  auto u = spm({{"a", -1}}, no_prefix, /*with_bytes=*/false);
  EXPECT_EQ(u->encode("a\xC3\xA9", false, false), (Ids{3, 0, 0}));
}

TEST(SyntheticSpm, SpacePrefixAndEscaping) {
  // 259 ▁, 260 a, 261 b, 262 ▁a, 263 ▁b
  const std::vector<SynTok> toks = {{"\xE2\x96\x81", -5},
                                    {"a", -5},
                                    {"b", -5},
                                    {"\xE2\x96\x81"
                                     "a",
                                     -1},
                                    {"\xE2\x96\x81"
                                     "b",
                                     -1}};
  auto t = spm(toks);
  EXPECT_TRUE(t->add_space_prefix());
  EXPECT_EQ(t->encode("a b", false, false), (Ids{262, 263}));
  EXPECT_EQ(t->encode("a b", true, false), (Ids{1, 262, 263}));
  EXPECT_EQ(t->encode("", true, false), (Ids{1}));
  EXPECT_EQ(t->encode("", false, false), (Ids{}));
  EXPECT_EQ(t->decode(Ids{262, 263}), "a b");
  EXPECT_EQ(t->token_to_piece(262), " a");
  auto u = spm(toks, no_prefix);
  EXPECT_EQ(u->encode("a b", false, false), (Ids{260, 263}));
  EXPECT_EQ(u->decode(Ids{262}), " a");
}

TEST(SyntheticSpm, SpecialAndUserDefinedSplitting) {
  // 259 ▁a, 260 ▁b, 261 <x> (user-defined), 262 <x>y (user-defined), 263 a, 264 ▁
  const std::vector<SynTok> toks = {{"\xE2\x96\x81"
                                     "a",
                                     -1},
                                    {"\xE2\x96\x81"
                                     "b",
                                     -1},
                                    {"<x>", 0, 4},
                                    {"<x>y", 0, 4},
                                    {"a", -2},
                                    {"\xE2\x96\x81", -3}};
  auto t = spm(toks);
  // Control token text: only with parse_special; a text fragment after a special token gets the space prefix.
  EXPECT_EQ(t->encode("<s>a", false, true), (Ids{1, 259}));
  const Ids plain = t->encode("<s>a", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 1), 0);
  // User-defined tokens are split out even without parse_special; the longest text wins.
  EXPECT_EQ(t->encode("a<x>b", false, false), (Ids{259, 261, 260}));
  EXPECT_EQ(t->encode("a<x>y", false, false), (Ids{259, 262}));
  EXPECT_EQ(t->token_to_piece(261), "<x>");
  // Without strip attributes the spaces after <x> stay text.
  EXPECT_EQ(t->encode("a<x>  b", false, false), (Ids{259, 261, 264, 264, 260}));
  // llama.cpp gives Phi-3's special tokens RSTRIP (by general.name).
  auto phi = spm(toks, [](GGUFWriter& w) { w.add_string("general.name", "Phi3-mini"); });
  EXPECT_EQ(phi->encode("a<x>  b", false, false), (Ids{259, 261, 260}));
}

/// BPE vocabulary (byte-level texts) with merges in the given order.
std::unique_ptr<Tokenizer> bpe(const std::string& pre, const std::vector<std::string>& merges,
                               const std::function<void(GGUFWriter&)>& kv = {}) {
  // 0 a, 1 b, 2 c, 3 Ġ, 4 ab, 5 bc, 6 abc, 7 Ġa, 8 ', 9 s, 10 's, 11 cab, 12 <|end|>
  const std::vector<SynTok> toks = {{"a"},
                                    {"b"},
                                    {"c"},
                                    {"\xC4\xA0"},
                                    {"ab"},
                                    {"bc"},
                                    {"abc"},
                                    {"\xC4\xA0"
                                     "a"},
                                    {"'"},
                                    {"s"},
                                    {"'s"},
                                    {"cab"},
                                    {"<|end|>", 0, 3}};
  return test::make_tokenizer(test::vocab_gguf("gpt2", toks, [&](GGUFWriter& w) {
    w.add_string("tokenizer.ggml.pre", pre);
    w.add_string_array("tokenizer.ggml.merges", merges);
    w.add_u32("tokenizer.ggml.bos_token_id", 12);
    w.add_u32("tokenizer.ggml.eos_token_id", 12);
    if (kv) kv(w);
  }));
}

TEST(SyntheticBpe, LowestRankMergesFirst) {
  auto t = bpe("gpt-2", {"a b", "b c", "ab c", "\xC4\xA0 a", "' s"});
  EXPECT_EQ(t->type(), VocabType::BPE);
  EXPECT_EQ(t->encode("abc", false, false), (Ids{6}));
  auto u = bpe("gpt-2", {"b c", "a b", "ab c"});
  EXPECT_EQ(u->encode("abc", false, false), (Ids{0, 5}));  // bc first; (a, bc) is no merge
}

TEST(SyntheticBpe, PreTokenizerWordsAndBytes) {
  auto t = bpe("gpt-2", {"a b", "b c", "ab c", "\xC4\xA0 a", "' s"});
  EXPECT_EQ(t->encode(" a's", false, false), (Ids{7, 10}));  // " a" | "'s"
  EXPECT_EQ(t->decode(Ids{7, 10}), " a's");
  EXPECT_EQ(t->encode("cab", false, false), (Ids{2, 4}));
  // Bytes without a token are dropped, as llama.cpp does.
  EXPECT_EQ(t->encode("a\xC3\xA9", false, false), (Ids{0}));
  EXPECT_FALSE(t->add_bos());
  EXPECT_EQ(t->encode("a", true, false), (Ids{0}));
  EXPECT_EQ(t->encode("a<|end|>", false, true), (Ids{0, 12}));
  EXPECT_TRUE(t->is_eog(12));
  EXPECT_EQ(t->eot(), 12);  // "<|end|>" is recognised as end of turn by its text
}

TEST(SyntheticBpe, Llama3IgnoresMergesForWholeTokensAndAddsBos) {
  auto t = bpe("llama-bpe", {"a b", "b c", "ab c"});
  EXPECT_TRUE(t->add_bos());
  EXPECT_EQ(t->encode("cab", true, false), (Ids{12, 11}));  // "cab" is a token: no merging
  auto u = bpe("llama-bpe", {"a b"}, [](GGUFWriter& w) { w.add_bool("tokenizer.ggml.add_bos_token", false); });
  EXPECT_EQ(u->encode("cab", true, false), (Ids{11}));
}

}  // namespace
}  // namespace snapkv
