// snapkv tokenizer: encode / decode (llama.cpp's llama_vocab::impl::tokenize and token_to_piece).
#include "snapkv/tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "snapkv/error.h"
#include "tokenizer/tokenizer_impl.h"

namespace snapkv {

namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

std::string escape_spaces(std::string_view s) {
  std::string out;
  out.reserve(s.size() + s.size() / 4);
  for (char c : s) {
    if (c == ' ') {
      out += kSpmSpace;
    } else {
      out += c;
    }
  }
  return out;
}

std::string unescape_spaces(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, kSpmSpace.size(), kSpmSpace) == 0) {
      out += ' ';
      i += kSpmSpace.size();
    } else {
      out += s[i++];
    }
  }
  return out;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

namespace {
std::vector<int32_t> encode_fragments(const Tokenizer::Impl& im, std::string_view text, bool add_special,
                                      const std::vector<tok::Fragment>& frags);
}  // namespace

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  return encode_fragments(*impl_, text, add_special, impl_->splitter->split(text, parse_special));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special,
                                       std::span<const TextSpan> special_spans) const {
  for (size_t k = 0; k < special_spans.size(); ++k) {
    const TextSpan& s = special_spans[k];
    if (s.begin > s.end || s.end > text.size() || (k > 0 && s.begin < special_spans[k - 1].end)) {
      throw Error(fmt::format("tokenizer: special span {} [{}, {}) is not sorted, disjoint and inside the text", k,
                              s.begin, s.end));
    }
  }
  return encode_fragments(*impl_, text, add_special, impl_->splitter->split(text, special_spans));
}

namespace {

std::vector<int32_t> encode_fragments(const Tokenizer::Impl& im, std::string_view text, bool add_special,
                                      const std::vector<tok::Fragment>& frags) {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);

  if (add_special && im.add_bos) out.push_back(im.bos);
  if (im.type == VocabType::SPM) {
    bool prev_special = true;  // a space prefix goes in front of the first text and after special tokens
    for (const auto& fr : frags) {
      if (fr.is_token) {
        out.push_back(fr.id);
        prev_special = true;
        continue;
      }
      std::string piece = (im.add_space_prefix && prev_special) ? std::string(" ") : std::string();
      piece.append(text.substr(fr.off, fr.len));
      tok::spm_tokenize(im.vocab, im.byte_tokens, escape_spaces(piece), out);
      prev_special = false;
    }
  } else {
    for (const auto& fr : frags) {
      if (fr.is_token) {
        out.push_back(fr.id);
        continue;
      }
      for (const std::string& word : im.pretok->split(text.substr(fr.off, fr.len))) {
        tok::bpe_tokenize_word(im.vocab, im.ranks, word, im.ignore_merges, out);
      }
    }
  }
  if (add_special && im.add_eos) out.push_back(im.eos);
  return out;
}

}  // namespace

std::string Tokenizer::token_to_piece(int32_t id, bool render_special) const {
  const Impl& im = *impl_;
  im.check_id(id);
  const uint32_t attr = im.vocab.attrs[id];
  const std::string_view text = im.vocab.text(id);
  if (attr & (kTokenAttrUnknown | kTokenAttrControl)) return render_special ? std::string(text) : std::string();
  if (attr & kTokenAttrUserDefined) return std::string(text);
  if (attr & kTokenAttrNormal) {
    if (im.type == VocabType::SPM) return unescape_spaces(text);
    std::string out;
    out.reserve(text.size());
    for (uint32_t cpt : tok::utf8_to_cpts(text)) {
      const int b = tok::gpt2_cpt_to_byte(cpt);
      if (b >= 0) {
        out.push_back(static_cast<char>(b));
      } else {
        tok::append_utf8(out, cpt);  // not a byte stand-in: keep the character (llama.cpp marks it)
      }
    }
    return out;
  }
  if (attr & kTokenAttrByte) {  // "<0xNN>"
    if (text.size() == 6 && text.substr(0, 3) == "<0x" && text[5] == '>' && hex_digit(text[3]) >= 0 &&
        hex_digit(text[4]) >= 0) {
      return std::string(1, static_cast<char>(hex_digit(text[3]) * 16 + hex_digit(text[4])));
    }
    return std::string(text);
  }
  return std::string();  // unused / undefined tokens
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool render_special) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    std::string piece = token_to_piece(ids[i], render_special);
    if (i == 0 && impl_->add_space_prefix && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    out += piece;
  }
  return out;
}

std::string_view Tokenizer::token_text(int32_t id) const {
  impl_->check_id(id);
  return impl_->vocab.text(id);
}

float Tokenizer::token_score(int32_t id) const {
  impl_->check_id(id);
  return impl_->vocab.scores[id];
}

uint32_t Tokenizer::token_attr(int32_t id) const {
  impl_->check_id(id);
  return impl_->vocab.attrs[id];
}

int32_t Tokenizer::find_token(std::string_view text) const { return impl_->vocab.find(text); }

int32_t Tokenizer::n_vocab() const { return impl_->vocab.size(); }
VocabType Tokenizer::type() const { return impl_->type; }
std::string_view Tokenizer::pre() const { return impl_->pre; }
int32_t Tokenizer::bos() const { return impl_->bos; }
int32_t Tokenizer::eos() const { return impl_->eos; }
int32_t Tokenizer::eot() const { return impl_->eot; }
int32_t Tokenizer::unk() const { return impl_->unk; }
int32_t Tokenizer::pad() const { return impl_->pad; }
bool Tokenizer::add_bos() const { return impl_->add_bos; }
bool Tokenizer::add_eos() const { return impl_->add_eos; }
bool Tokenizer::add_space_prefix() const { return impl_->add_space_prefix; }

bool Tokenizer::is_eog(int32_t id) const { return std::binary_search(impl_->eog.begin(), impl_->eog.end(), id); }

std::vector<int32_t> Tokenizer::eog_ids() const { return impl_->eog; }

// ---- streaming ----------------------------------------------------------------------------------

TokenStreamDecoder::TokenStreamDecoder(const Tokenizer& tok, bool render_special)
    : tok_(&tok), render_special_(render_special) {}

std::string TokenStreamDecoder::push(int32_t id) {
  pending_ += tok_->token_to_piece(id, render_special_);
  std::string out;
  const size_t held = append_valid_utf8(out, pending_, /*hold_tail=*/true);
  pending_.erase(0, pending_.size() - held);
  return out;
}

std::string TokenStreamDecoder::flush() {
  std::string out;
  append_valid_utf8(out, pending_, /*hold_tail=*/false);
  pending_.clear();
  return out;
}

}  // namespace snapkv
