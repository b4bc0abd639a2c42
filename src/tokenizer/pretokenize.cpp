// snapkv tokenizer: BPE pre-tokenizers (regex word splitting) with PCRE2.
//
// The regex sets per tokenizer.ggml.pre value are those llama.cpp uses (src/llama-vocab.cpp,
// llm_tokenizer_bpe), which come from each model's Hugging Face tokenizer.json. They are applied as
// llama.cpp's unicode_regex_split does: one after another, each splitting every current segment into
// its matches and the unmatched gaps between them (gaps are words too), with lookaheads seeing only
// the current segment. llama.cpp's \s is the Unicode White_Space set; it is spelled out below so that
// PCRE2 matches exactly that set.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <fmt/format.h>
#include <pcre2.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "snapkv/error.h"
#include "tokenizer/tokenizer_impl.h"

namespace snapkv::tok {

namespace {

// White_Space code points (llama.cpp unicode_cpt_flags::is_whitespace), as class items.
constexpr std::string_view kWs =
    "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

/// Rewrites \s and \S of a llama.cpp-notation regex into explicit White_Space classes.
std::string translate(std::string_view re) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < re.size(); ++i) {
    const char c = re[i];
    if (c == '\\' && i + 1 < re.size()) {
      const char d = re[i + 1];
      if (d == 's') {
        out += in_class ? std::string(kWs) : "[" + std::string(kWs) + "]";
      } else if (d == 'S') {
        if (in_class) throw std::logic_error("\\S inside a character class is not supported");
        out += "[^" + std::string(kWs) + "]";
      } else {
        out += c;
        out += d;
      }
      ++i;
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
    } else if (c == ']' && in_class) {
      in_class = false;
    }
    out += c;
  }
  return out;
}

// The regex sets (llama.cpp notation; \p{..} are Unicode general categories).
const char* const kGpt2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
const char* const kLlama3 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* const kQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

bool one_of(std::string_view s, std::initializer_list<std::string_view> names) {
  for (auto n : names) {
    if (s == n) return true;
  }
  return false;
}

}  // namespace

bool pre_tokenizer_spec(std::string_view pre, PreTokenizerSpec& spec) {
  spec = PreTokenizerSpec{};
  if (pre.empty() || pre == "default") {
    spec.regexes = {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"};
  } else if (one_of(pre, {"gpt-2", "phi-2", "jina-es", "jina-de", "jina-v1-en", "jina-v2-es", "jina-v2-de",
                          "jina-v2-code", "roberta-bpe", "gigachat", "exaone4", "mpt", "olmo", "jais"})) {
    spec.regexes = {kGpt2};
  } else if (pre == "falcon") {
    spec.regexes = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2, "[0-9][0-9][0-9]"};
  } else if (pre == "deepseek-coder") {
    // CJK ideographs U+4E00-9FA5, U+0800-4E00, Hangul U+AC00-D7FF.
    spec.regexes = {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+",
                    "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+", "\\p{N}"};
  } else if (one_of(pre, {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"})) {
    spec.regexes = {"\\p{N}", kGpt2};
  } else if (one_of(pre, {"llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral"})) {
    spec.regexes = {kLlama3};
    spec.ignore_merges = true;
    spec.add_bos = true;
  } else if (one_of(pre, {"dbrx", "smaug-bpe"})) {
    spec.regexes = {kLlama3};
  } else if (one_of(pre, {"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez"})) {
    spec.regexes = {kQwen2};
  } else {
    return false;
  }
  return true;
}

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer(const std::vector<std::string>& regexes) {
  for (const auto& re : regexes) {
    const std::string pat = translate(re);
    int err = 0;
    PCRE2_SIZE erroff = 0;
    auto c = std::make_unique<Compiled>();
    c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pat.data()), pat.size(),
                            PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &erroff, nullptr);
    if (c->code == nullptr) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      throw Error(fmt::format("tokenizer: cannot compile pre-tokenizer regex '{}' at offset {}: {}", re, erroff,
                              reinterpret_cast<const char*>(msg)));
    }
    pcre2_jit_compile(c->code, PCRE2_JIT_COMPLETE);  // optional speed-up; the interpreter is the fallback
    codes_.push_back(std::move(c));
  }
}

PreTokenizer::~PreTokenizer() = default;

std::vector<std::string> PreTokenizer::split(std::string_view text) const {
  const std::vector<uint32_t> cpts = utf8_to_cpts(text);
  const size_t n = cpts.size();

  // The subject PCRE2 matches: valid UTF-8 of the code points (surrogates and values above U+10FFFF,
  // which llama.cpp may decode, are given a private-use stand-in of the same class: no letter,
  // number, punctuation or space). boff: byte offset of each code point; cidx: the inverse.
  std::string subject;
  subject.reserve(text.size());
  std::vector<size_t> boff(n + 1);
  for (size_t i = 0; i < n; ++i) {
    boff[i] = subject.size();
    const uint32_t c = cpts[i];
    append_utf8(subject, (c >= 0xD800 && c <= 0xDFFF) || c > 0x10FFFF ? 0xE000 : c);
  }
  boff[n] = subject.size();
  std::vector<uint32_t> cidx(subject.size() + 1, 0);
  for (size_t i = 0; i <= n; ++i) cidx[boff[i]] = static_cast<uint32_t>(i);

  std::vector<size_t> seg_lens;  // in code points
  if (n > 0) seg_lens.push_back(n);
  for (const auto& c : codes_) {
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md_owner(
        pcre2_match_data_create_from_pattern(c->code, nullptr), &pcre2_match_data_free);
    pcre2_match_data* md = md_owner.get();
    if (md == nullptr) throw Error("tokenizer: out of memory for regex match data");
    std::vector<size_t> next;
    next.reserve(seg_lens.size() * 2);
    size_t start = 0;  // code point index of the segment
    for (size_t len : seg_lens) {
      const size_t b0 = boff[start];
      const size_t blen = boff[start + len] - b0;
      const auto* subj = reinterpret_cast<PCRE2_SPTR>(subject.data() + b0);
      size_t pos = 0;
      size_t last = 0;  // end of the previous match, bytes relative to b0
      while (pos <= blen) {
        const int rc = pcre2_match(c->code, subj, blen, pos, PCRE2_NO_UTF_CHECK, md, nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) throw Error(fmt::format("tokenizer: regex match failed (PCRE2 error {})", rc));
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        const size_t ms = ov[0], me = ov[1];
        if (me == ms) {  // empty match: step one character
          if (ms >= blen) break;
          pos = ms + utf8_seq_len(static_cast<uint8_t>(subject[b0 + ms]));
          continue;
        }
        if (ms > last) next.push_back(cidx[b0 + ms] - cidx[b0 + last]);
        next.push_back(cidx[b0 + me] - cidx[b0 + ms]);
        last = me;
        pos = me;
      }
      if (last < blen) next.push_back(cidx[b0 + blen] - cidx[b0 + last]);
      start += len;
    }
    seg_lens = std::move(next);
  }

  // Words: the original code points re-encoded, each byte mapped by GPT-2's byte map.
  std::vector<std::string> words;
  words.reserve(seg_lens.size());
  size_t start = 0;
  std::string raw;
  for (size_t len : seg_lens) {
    raw.clear();
    for (size_t i = start; i < start + len; ++i) append_utf8(raw, cpts[i]);
    std::string w;
    w.reserve(raw.size() * 2);
    for (char b : raw) w += gpt2_byte_to_utf8(static_cast<uint8_t>(b));
    words.push_back(std::move(w));
    start += len;
  }
  return words;
}

}  // namespace snapkv::tok
