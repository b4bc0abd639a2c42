// snapkv chat templates: the Jinja lexer (see jinja_lexer.h). Whitespace rules follow jinja2's
// lexer (jinja2/lexer.py): `{%-`/`{{-`/`{#-` strip all whitespace before the tag, `-%}`/`-}}`/
// `-#}` all whitespace after it; lstrip_blocks removes spaces and tabs between the start of a
// line and a block or comment tag (not `{{`, not with `{%+`); trim_blocks removes the first
// newline after a block or comment tag (not with `+%}`).
#include "chat/jinja_lexer.h"

#include <fmt/format.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "chat/jinja_text.h"

namespace snapkv::jinja {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// Newlines normalised to "\n" and one trailing newline dropped (jinja2's keep_trailing_newline=False).
std::string normalize(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (size_t k = 0; k < src.size(); ++k) {
    if (src[k] == '\r') {
      out += '\n';
      if (k + 1 < src.size() && src[k + 1] == '\n') ++k;
    } else {
      out += src[k];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string src) : s_(std::move(src)) {}

  std::vector<Token> run() {
    bool strip_next = false;  // the previous tag ended with '-'
    bool trim_next = false;   // the previous tag was a block/comment (trim_blocks)
    while (k_ < s_.size()) {
      const size_t at = find_tag(k_);
      std::string text = s_.substr(k_, at - k_);
      const Pos text_pos = pos_of(k_);
      if (strip_next) {
        size_t b = 0;
        while (b < text.size() && is_space(text[b])) ++b;
        text.erase(0, b);
      } else if (trim_next && !text.empty() && text[0] == '\n') {
        text.erase(0, 1);
      }
      strip_next = trim_next = false;
      if (at >= s_.size()) {
        push(Tok::Text, std::move(text), text_pos);
        break;
      }
      const char kind = s_[at + 1];  // '{', '%' or '#'
      const char mod = at + 2 < s_.size() ? s_[at + 2] : '\0';
      if (mod == '-') {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if (mod != '+' && kind != '{') {
        lstrip(text, at);
      }
      if (!text.empty()) push(Tok::Text, std::move(text), text_pos);
      k_ = at + 2 + ((mod == '-' || mod == '+') ? 1 : 0);
      const Pos tag_pos = pos_of(at);
      if (kind == '#') {
        const size_t end = s_.find("#}", k_);
        if (end == std::string::npos) throw TemplateError{"unterminated comment: '{#' without '#}'", tag_pos};
        strip_next = end > k_ && s_[end - 1] == '-';
        trim_next = !strip_next && !(end > k_ && s_[end - 1] == '+');
        k_ = end + 2;
        continue;
      }
      const bool block = kind == '%';
      push(block ? Tok::BlockBegin : Tok::VarBegin, block ? "{%" : "{{", tag_pos);
      if (block && raw_block()) {
        lex_raw(tag_pos, strip_next, trim_next);
        continue;
      }
      lex_tag(block, tag_pos, strip_next, trim_next);
    }
    push(Tok::End, "", pos_of(s_.size()));
    return std::move(out_);
  }

 private:
  size_t find_tag(size_t from) const {
    for (size_t k = from; k + 1 < s_.size(); ++k) {
      if (s_[k] == '{' && (s_[k + 1] == '{' || s_[k + 1] == '%' || s_[k + 1] == '#')) return k;
    }
    return s_.size();
  }

  // lstrip_blocks: spaces/tabs between the line start and the tag go.
  void lstrip(std::string& text, size_t tag_at) const {
    size_t b = text.size();
    while (b > 0 && (text[b - 1] == ' ' || text[b - 1] == '\t')) --b;
    const size_t abs_b = tag_at - (text.size() - b);
    if (abs_b == 0 || s_[abs_b - 1] == '\n') text.erase(b);
  }

  Pos pos_of(size_t off) {
    // Positions are requested in increasing order; advance a cursor.
    while (pc_ < off && pc_ < s_.size()) {
      if (s_[pc_] == '\n') {
        ++pp_.line;
        pp_.col = 1;
      } else if ((static_cast<unsigned char>(s_[pc_]) & 0xC0) != 0x80) {
        ++pp_.col;
      }
      ++pc_;
    }
    return pp_;
  }

  void push(Tok t, std::string v, Pos p) { out_.push_back({t, std::move(v), p}); }

  void skip_space() {
    while (k_ < s_.size() && is_space(s_[k_])) ++k_;
  }

  // The tag just opened is `{% raw %}` (or `{%- raw -%}` ...).
  bool raw_block() {
    size_t j = k_;
    while (j < s_.size() && is_space(s_[j])) ++j;
    if (s_.compare(j, 3, "raw") != 0 || (j + 3 < s_.size() && is_name_char(s_[j + 3]))) return false;
    j += 3;
    while (j < s_.size() && is_space(s_[j])) ++j;
    return s_.compare(j, 2, "%}") == 0 || s_.compare(j, 3, "-%}") == 0 || s_.compare(j, 3, "+%}") == 0;
  }

  void lex_raw(Pos tag_pos, bool& strip_next, bool& trim_next) {
    out_.pop_back();  // the BlockBegin: a raw block is plain text
    size_t j = s_.find("%}", k_);
    const bool strip_after_open = s_[j - 1] == '-';
    k_ = j + 2;
    if (strip_after_open) skip_space();  // no trim_blocks after `{% raw %}` (as jinja2)
    // Find {% endraw %} / {%- endraw -%}.
    size_t from = k_;
    while (true) {
      const size_t open = s_.find("{%", from);
      if (open == std::string::npos) throw TemplateError{"unterminated raw block: no '{% endraw %}'", tag_pos};
      size_t q = open + 2;
      const bool strip_before = q < s_.size() && s_[q] == '-';
      if (strip_before || (q < s_.size() && s_[q] == '+')) ++q;
      while (q < s_.size() && is_space(s_[q])) ++q;
      if (s_.compare(q, 6, "endraw") != 0) {
        from = open + 2;
        continue;
      }
      q += 6;
      while (q < s_.size() && is_space(s_[q])) ++q;
      const bool strip_after = s_.compare(q, 3, "-%}") == 0;
      const bool keep_after = s_.compare(q, 3, "+%}") == 0;
      if (!strip_after && !keep_after && s_.compare(q, 2, "%}") != 0) {
        throw TemplateError{"malformed '{% endraw %}'", pos_of(open)};
      }
      std::string text = s_.substr(k_, open - k_);
      if (strip_before) {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if (s_[open + 2] != '+') {
        lstrip(text, open);
      }
      if (!text.empty()) push(Tok::Text, std::move(text), tag_pos);
      k_ = q + (strip_after || keep_after ? 3 : 2);
      strip_next = strip_after;
      trim_next = !strip_after && !keep_after;
      return;
    }
  }

  void lex_tag(bool block, Pos tag_pos, bool& strip_next, bool& trim_next) {
    int braces = 0;  // '{' of dict literals open inside the tag ('}}' then closes a dict)
    while (true) {
      skip_space();
      if (k_ >= s_.size()) {
        throw TemplateError{block ? "unterminated block tag: '{%' without '%}'" : "unterminated '{{' without '}}'",
                            tag_pos};
      }
      const Pos p = pos_of(k_);
      const char c = s_[k_];
      // End of the tag, with its modifier.
      const std::string_view end = block ? "%}" : "}}";
      if (braces == 0 || block) {
        for (const char m : {'-', '+', '\0'}) {
          const size_t len = end.size() + (m ? 1 : 0);
          if (m && (k_ >= s_.size() || s_[k_] != m)) continue;
          if (s_.compare(k_ + (m ? 1 : 0), end.size(), end) != 0) continue;
          push(block ? Tok::BlockEnd : Tok::VarEnd, std::string(end), p);
          k_ += len;
          strip_next = m == '-';
          trim_next = block && m == '\0';
          return;
        }
      }
      if (is_name_start(c)) {
        const size_t b = k_;
        while (k_ < s_.size() && is_name_char(s_[k_])) ++k_;
        push(Tok::Name, s_.substr(b, k_ - b), p);
      } else if (std::isdigit(static_cast<unsigned char>(c)) != 0) {
        lex_number(p);
      } else if (c == '\'' || c == '"') {
        lex_string(p);
      } else {
        static constexpr std::string_view kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*",
                                                    "/",  "%",  "~",  "<",  ">",  "=",  "(", ")", "[",
                                                    "]",  "{",  "}",  ",",  ".",  ":",  "|"};
        bool found = false;
        for (std::string_view op : kOps) {
          if (s_.compare(k_, op.size(), op) == 0) {
            if (op == "{") ++braces;
            if (op == "}") --braces;
            push(Tok::Op, std::string(op), p);
            k_ += op.size();
            found = true;
            break;
          }
        }
        if (!found) {
          throw TemplateError{fmt::format("unexpected character '{}' in a tag", c), p};
        }
      }
    }
  }

  void lex_number(Pos p) {
    const size_t b = k_;
    if (s_[k_] == '0' && k_ + 1 < s_.size() && std::strchr("xXoObB", s_[k_ + 1]) != nullptr) {
      const char kind = static_cast<char>(std::tolower(s_[k_ + 1]));
      const int base = kind == 'x' ? 16 : (kind == 'o' ? 8 : 2);
      k_ += 2;
      std::string digits;
      while (k_ < s_.size() && (std::isxdigit(static_cast<unsigned char>(s_[k_])) != 0 || s_[k_] == '_')) {
        if (s_[k_] != '_') digits += s_[k_];
        ++k_;
      }
      errno = 0;
      char* end = nullptr;
      const long long v = digits.empty() ? 0 : std::strtoll(digits.c_str(), &end, base);
      if (digits.empty() || *end != '\0' || errno == ERANGE) throw TemplateError{"malformed integer literal", p};
      push(Tok::Int, std::to_string(v), p);
      return;
    }
    auto digits = [&] {
      while (k_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[k_])) != 0 || s_[k_] == '_')) ++k_;
    };
    digits();
    bool real = false;
    if (k_ + 1 < s_.size() && s_[k_] == '.' && std::isdigit(static_cast<unsigned char>(s_[k_ + 1])) != 0) {
      real = true;
      ++k_;
      digits();
    }
    if (k_ < s_.size() && (s_[k_] == 'e' || s_[k_] == 'E')) {
      size_t j = k_ + 1;
      if (j < s_.size() && (s_[j] == '+' || s_[j] == '-')) ++j;
      if (j < s_.size() && std::isdigit(static_cast<unsigned char>(s_[j])) != 0) {
        real = true;
        k_ = j;
        digits();
      }
    }
    std::string v;
    for (size_t j = b; j < k_; ++j) {
      if (s_[j] != '_') v += s_[j];
    }
    push(real ? Tok::Float : Tok::Int, std::move(v), p);
  }

  // Python string-literal escapes, as jinja2 decodes them ("unicode-escape"); an unknown escape
  // keeps its backslash.
  void lex_string(Pos p) {
    const char q = s_[k_++];
    std::string v;
    while (true) {
      if (k_ >= s_.size()) throw TemplateError{"unterminated string literal", p};
      const char c = s_[k_++];
      if (c == q) break;
      if (c != '\\') {
        v += c;
        continue;
      }
      if (k_ >= s_.size()) throw TemplateError{"unterminated string literal", p};
      const char e = s_[k_++];
      auto hex = [&](int n) -> uint32_t {
        if (k_ + static_cast<size_t>(n) > s_.size()) throw TemplateError{"truncated escape in a string literal", p};
        uint32_t x = 0;
        for (int j = 0; j < n; ++j) {
          const char h = s_[k_++];
          if (std::isxdigit(static_cast<unsigned char>(h)) == 0) {
            throw TemplateError{"bad hexadecimal escape in a string literal", p};
          }
          x = x * 16 + static_cast<uint32_t>(
                           std::isdigit(static_cast<unsigned char>(h)) != 0 ? h - '0' : (std::tolower(h) - 'a' + 10));
        }
        return x;
      };
      switch (e) {
        case 'n':
          v += '\n';
          break;
        case 't':
          v += '\t';
          break;
        case 'r':
          v += '\r';
          break;
        case '\\':
        case '\'':
        case '"':
          v += e;
          break;
        case '\n':
          break;  // line continuation
        case 'a':
          v += '\a';
          break;
        case 'b':
          v += '\b';
          break;
        case 'f':
          v += '\f';
          break;
        case 'v':
          v += '\v';
          break;
        case '0':
        case '1':
        case '2':
        case '3':
        case '4':
        case '5':
        case '6':
        case '7': {  // one to three octal digits: the code point
          uint32_t cp = static_cast<uint32_t>(e - '0');
          for (int j = 0; j < 2 && k_ < s_.size() && s_[k_] >= '0' && s_[k_] <= '7'; ++j)
            cp = cp * 8 + static_cast<uint32_t>(s_[k_++] - '0');
          encode_utf8(v, cp);
          break;
        }
        case 'x':
          encode_utf8(v, hex(2));
          break;
        case 'u':
        case 'U': {
          const uint32_t cp = hex(e == 'u' ? 4 : 8);
          if (cp > 0x10FFFF) throw TemplateError{"escape beyond U+10FFFF in a string literal", p};
          // Python keeps a lone surrogate in the string; it cannot become UTF-8 text (transformers'
          // tokenizer fails on it), and written as bytes it would be invalid UTF-8 (CESU-8).
          if (cp >= 0xD800 && cp <= 0xDFFF)
            throw TemplateError{"a surrogate escape (U+D800..U+DFFF) in a string literal cannot become UTF-8 text", p};
          encode_utf8(v, cp);
          break;
        }
        default:
          v += '\\';
          v += e;
      }
    }
    push(Tok::String, std::move(v), p);
  }

  std::string s_;
  size_t k_ = 0;
  size_t pc_ = 0;  // position cursor
  Pos pp_;
  std::vector<Token> out_;
};

}  // namespace

std::vector<Token> lex(std::string_view source) { return Lexer(normalize(source)).run(); }

}  // namespace snapkv::jinja
