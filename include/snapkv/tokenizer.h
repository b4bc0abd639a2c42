// snapkv: text <-> token ids, compatible with llama.cpp's tokenizer (src/llama-vocab.cpp, unicode.cpp).
//
// Two vocabulary kinds read from GGUF metadata (spec: ggml/docs/gguf.md, "tokenizer.ggml.*"):
//  - "llama": SentencePiece-style (SPM). Score-driven bigram merging over UTF-8 characters, spaces
//    escaped as U+2581 "▁", byte fallback to <0xNN> tokens for characters outside the vocabulary.
//  - "gpt2": byte-level BPE. Text is split by the pre-tokenizer regexes chosen by tokenizer.ggml.pre
//    (PCRE2, Unicode categories), bytes mapped to printable code points (GPT-2 bytes_to_unicode),
//    then merged by merge rank.
// In both, control / user-defined token texts are split out of the input first, as llama.cpp does.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace snapkv {

class GGUFFile;

/// A byte range [begin, end) of a text.
struct TextSpan {
  size_t begin = 0;
  size_t end = 0;
};

/// Kind of vocabulary (tokenizer.ggml.model).
enum class VocabType { SPM, BPE };

/// Token attributes as bit flags; values follow llama.cpp's llama_token_attr.
/// token_type in GGUF: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte.
enum TokenAttr : uint32_t {
  kTokenAttrUndefined = 0,
  kTokenAttrUnknown = 1u << 0,
  kTokenAttrUnused = 1u << 1,
  kTokenAttrNormal = 1u << 2,
  kTokenAttrControl = 1u << 3,
  kTokenAttrUserDefined = 1u << 4,
  kTokenAttrByte = 1u << 5,
  kTokenAttrLstrip = 1u << 7,  ///< strip whitespace left of the token when splitting it out of text
  kTokenAttrRstrip = 1u << 8,  ///< strip whitespace right of it
};

/// A loaded vocabulary with its encoder and decoder. Immutable after construction: every const
/// method is safe to call from several threads at once.
class Tokenizer {
 public:
  /// Builds from GGUF metadata: tokenizer.ggml.model ("llama" = SPM, "gpt2" = BPE), tokens, scores,
  /// token_type, merges (BPE), pre (BPE pre-tokenizer), bos/eos/eot/unk/pad ids, add_bos_token,
  /// add_eos_token, add_space_prefix (SPM default true). Special ids that are out of range are ignored
  /// (as llama.cpp does). Throws snapkv::Error naming the file and the key for a missing or malformed
  /// key, and for an unsupported model or pre-tokenizer type (naming it).
  static std::unique_ptr<Tokenizer> from_gguf(const GGUFFile& f);

  virtual ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  /// Token ids of `text` (bytes, normally UTF-8; invalid UTF-8 is tolerated as llama.cpp does).
  /// add_special: prepend BOS / append EOS as add_bos()/add_eos() say.
  /// parse_special: split out control-token texts such as "<start_of_turn>" and emit their ids.
  /// User-defined tokens (token_type 4) are split out in either case, as llama.cpp does.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;
  /// Like encode(text, add_special, true), except that a control or unknown token's text is split
  /// out only where it lies wholly inside one of `special_spans` (sorted, disjoint byte ranges:
  /// text a chat template wrote itself); elsewhere it is tokenised as ordinary text. With spans
  /// covering the whole text this equals encode(text, add_special, true).
  std::vector<int32_t> encode(std::string_view text, bool add_special, std::span<const TextSpan> special_spans) const;

  /// The bytes token `id` stands for when detokenizing: SPM "▁" -> " ", "<0x0A>" -> "\n"; BPE: the
  /// byte-decoded text; user-defined tokens: their text; control/unknown tokens: "" unless
  /// render_special (then their text). Throws Error for an id outside [0, n_vocab).
  std::string token_to_piece(int32_t id, bool render_special = false) const;

  /// Concatenated pieces of `ids`, like llama.cpp's llama_detokenize(remove_special=false,
  /// unparse_special=render_special) without clean-up of spaces: when add_space_prefix() is on, one
  /// leading space of the first token's piece is dropped, so decode(encode(s, false, false)) == s
  /// for lossless vocabularies. May hold invalid UTF-8 when `ids` end in the middle of a character.
  std::string decode(std::span<const int32_t> ids, bool render_special = false) const;

  std::string_view token_text(int32_t id) const;  ///< raw vocabulary string; throws Error if out of range
  float token_score(int32_t id) const;            ///< tokenizer.ggml.scores (0 when absent)
  uint32_t token_attr(int32_t id) const;          ///< TokenAttr bits (after llama.cpp's fix-ups)
  /// Id of the token whose text is exactly `text`, or -1.
  int32_t find_token(std::string_view text) const;

  int32_t n_vocab() const;
  VocabType type() const;
  std::string_view pre() const;  ///< BPE pre-tokenizer name ("default" for SPM)
  int32_t bos() const;           ///< -1 if none
  int32_t eos() const;           ///< -1 if none
  int32_t eot() const;           ///< end-of-turn token (e.g. <end_of_turn>, <|im_end|>, <|eot_id|>), -1 if none
  int32_t unk() const;           ///< -1 if none
  int32_t pad() const;           ///< -1 if none
  bool add_bos() const;
  bool add_eos() const;
  bool add_space_prefix() const;
  /// True for tokens that end generation: eos, eot and end-of-turn tokens recognised by their text
  /// (<end_of_turn>, <|im_end|>, <|eot_id|>, <|endoftext|>, <|end|>, <|eom_id|>, ...), as llama.cpp.
  bool is_eog(int32_t id) const;
  /// All end-of-generation ids, ascending.
  std::vector<int32_t> eog_ids() const;

  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Streams detokenized text for generated tokens: push() returns only complete, valid UTF-8, holding
/// back a partial multi-byte character until a later token completes it (byte-fallback tokens split
/// characters). Bytes that can never form valid UTF-8 are replaced by U+FFFD right away; flush()
/// returns what is held back, each incomplete sequence as one U+FFFD. No leading space is stripped
/// (the stream continues a prompt). Keeps a reference to the tokenizer, which must outlive it.
class TokenStreamDecoder {
 public:
  explicit TokenStreamDecoder(const Tokenizer& tok, bool render_special = false);
  /// Text completed by token `id` (possibly ""). Throws Error for an out-of-range id.
  std::string push(int32_t id);
  /// The held-back remainder (U+FFFD per incomplete sequence); resets the decoder.
  std::string flush();

 private:
  const Tokenizer* tok_;
  bool render_special_;
  std::string pending_;  ///< bytes of an incomplete UTF-8 sequence (at most 3)
};

/// Appends `bytes` to `out` as valid UTF-8: complete well-formed sequences are copied, every maximal
/// ill-formed subpart becomes U+FFFD (Unicode 15, section 3.9, "U+FFFD substitution of maximal
/// subparts"). If `hold_tail` is set, a trailing incomplete-but-valid prefix of a sequence is not
/// emitted; its length is returned (0 otherwise).
size_t append_valid_utf8(std::string& out, std::string_view bytes, bool hold_tail);

}  // namespace snapkv
