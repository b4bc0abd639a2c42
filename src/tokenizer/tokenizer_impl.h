// snapkv tokenizer internals shared by the files of src/tokenizer (not a public header).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "snapkv/tokenizer.h"

namespace snapkv::tok {

// ---- UTF-8 helpers (utf8.cpp) ----------------------------------------------------------------

/// Length of the UTF-8 sequence announced by `lead`, judged by its high nibble only (1 for ASCII and
/// for stray continuation bytes), as llama.cpp's unicode_len_utf8.
inline size_t utf8_seq_len(uint8_t lead) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[lead >> 4];
}

/// Code points of `s` with llama.cpp's unicode_cpts_from_utf8 semantics: a lead byte followed by the
/// right number of continuation bytes is decoded (overlong forms and surrogates are not rejected);
/// any other byte becomes U+FFFD and decoding resumes at the next byte.
std::vector<uint32_t> utf8_to_cpts(std::string_view s);

/// Appends the UTF-8 encoding of `cpt` (values above U+10FFFF become U+FFFD).
void append_utf8(std::string& out, uint32_t cpt);

/// GPT-2 bytes_to_unicode(): the printable code point standing for byte `b` in byte-level BPE
/// vocabularies (bytes 0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF map to themselves, the other 68 bytes to
/// U+0100.. in order), as UTF-8.
const std::string& gpt2_byte_to_utf8(uint8_t b);

/// Inverse of gpt2_byte_to_utf8 on a code point: the byte, or -1 if `cpt` stands for none.
int gpt2_cpt_to_byte(uint32_t cpt);

// ---- vocabulary ------------------------------------------------------------------------------

/// Token strings, scores and attributes. Texts are stored in one arena; `by_text` maps each text to
/// its id (the first id wins for duplicates).
struct Vocab {
  std::string arena;
  std::vector<uint32_t> offsets;  ///< n+1 offsets into arena
  std::vector<float> scores;
  std::vector<uint32_t> attrs;  ///< TokenAttr bits
  std::unordered_map<std::string_view, int32_t> by_text;

  int32_t size() const { return static_cast<int32_t>(scores.size()); }
  std::string_view text(int32_t id) const {
    return std::string_view(arena).substr(offsets[id], offsets[id + 1] - offsets[id]);
  }
  int32_t find(std::string_view t) const {
    auto it = by_text.find(t);
    return it == by_text.end() ? -1 : it->second;
  }
};

// ---- special-token splitting (special_split.cpp) -------------------------------------------

/// A piece of the input: either raw text [off, off+len) or an already-known token id.
struct Fragment {
  bool is_token = false;
  int32_t id = -1;
  size_t off = 0;
  size_t len = 0;
};

/// Splits text at occurrences of control / user-defined / unknown token texts, with the semantics of
/// llama.cpp's tokenizer_st_partition: tokens are taken longest text first (ties: lower id first);
/// each token splits every raw fragment at its leftmost non-overlapping occurrences; LSTRIP/RSTRIP
/// attributes drop ASCII whitespace next to the token inside that fragment. A byte trie first finds
/// which special tokens occur at all, so only those are searched for: the cost is about
/// O(text * (longest match + number of distinct special tokens present)).
class SpecialSplitter {
 public:
  explicit SpecialSplitter(const Vocab& v);
  /// parse_special=false: only user-defined tokens (no control/unknown attribute) are split out.
  std::vector<Fragment> split(std::string_view text, bool parse_special) const;
  /// Control/unknown tokens split out only inside `spans` (sorted, disjoint); user-defined ones
  /// anywhere.
  std::vector<Fragment> split(std::string_view text, std::span<const TextSpan> spans) const;

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> next;  ///< (byte, node index), unsorted
    int32_t rank = -1;                              ///< token ending here, by priority rank
  };
  std::vector<Fragment> split_impl(std::string_view text, bool parse_special,
                                   const std::span<const TextSpan>* spans) const;
  const Vocab& vocab_;
  std::vector<Node> nodes_;
  std::vector<int32_t> order_;  ///< priority rank -> token id
  std::array<bool, 256> first_byte_{};
};

// ---- SPM (spm.cpp) ---------------------------------------------------------------------------

/// llama.cpp's llm_tokenizer_spm_session::tokenize on already-escaped text ("▁" for spaces):
/// split into UTF-8 characters, repeatedly merge the adjacent pair whose concatenation is a token
/// with the highest score (leftmost on ties; priority queue, O(n log n)), then emit each symbol's
/// token or, if it is not in the vocabulary, its bytes via byte_tokens.
void spm_tokenize(const Vocab& v, const std::array<int32_t, 256>& byte_tokens, std::string_view text,
                  std::vector<int32_t>& out);

// ---- BPE (bpe.cpp, pretokenize.cpp) ---------------------------------------------------------

/// Merge ranks from tokenizer.ggml.merges ("left right", first occurrence wins).
class BpeRanks {
 public:
  void add(std::string_view merge, int32_t rank);
  int32_t rank(std::string_view left, std::string_view right) const;  ///< -1 if absent

 private:
  std::unordered_map<std::string, int32_t> ranks_;  ///< key: left + '\xff' + right
};

/// llama.cpp's BPE merge of one pre-tokenized, byte-encoded word: start from UTF-8 characters,
/// repeatedly merge the adjacent pair of lowest rank (leftmost on ties), then emit each symbol's
/// token; a symbol that is not a token falls back to its single bytes that are tokens.
/// ignore_merges: a word that is itself a token is emitted whole (llama3-style vocabularies).
void bpe_tokenize_word(const Vocab& v, const BpeRanks& ranks, std::string_view word, bool ignore_merges,
                       std::vector<int32_t>& out);

/// Pre-tokenizer settings for a tokenizer.ggml.pre name.
struct PreTokenizerSpec {
  std::vector<std::string> regexes;  ///< applied one after another (llama.cpp notation, see .cpp)
  bool ignore_merges = false;
  bool add_bos = false;  ///< default of add_bos_token for this pre type
};

/// The spec for `pre`, or nullptr-like empty regexes if the name is unknown (returns false).
bool pre_tokenizer_spec(std::string_view pre, PreTokenizerSpec& spec);

/// Compiled regex pipeline (PCRE2 with UTF + UCP). Splits text into words the way llama.cpp's
/// unicode_regex_split does: each regex splits every current segment into its matches and the
/// unmatched gaps between them; the words are returned byte-encoded (gpt2_byte_to_utf8).
class PreTokenizer {
 public:
  explicit PreTokenizer(const std::vector<std::string>& regexes);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;
  std::vector<std::string> split(std::string_view text) const;

 private:
  struct Compiled;
  std::vector<std::unique_ptr<Compiled>> codes_;
};

}  // namespace snapkv::tok

namespace snapkv {

/// State of a loaded tokenizer (tokenizer_load.cpp fills it, tokenizer.cpp uses it).
struct Tokenizer::Impl {
  std::string path;  ///< GGUF file, for error messages
  VocabType type = VocabType::SPM;
  std::string pre = "default";
  tok::Vocab vocab;
  std::unique_ptr<tok::SpecialSplitter> splitter;
  std::array<int32_t, 256> byte_tokens{};     ///< SPM byte fallback ids (<0xNN>, else the byte, else unk)
  tok::BpeRanks ranks;                        ///< BPE
  std::unique_ptr<tok::PreTokenizer> pretok;  ///< BPE
  bool ignore_merges = false;
  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, pad = -1;
  bool add_bos = false, add_eos = false, add_space_prefix = false;
  std::vector<int32_t> eog;  ///< sorted end-of-generation ids

  void check_id(int32_t id) const;  ///< throws Error unless 0 <= id < n_vocab
};

}  // namespace snapkv
