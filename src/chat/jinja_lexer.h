// snapkv chat templates: the Jinja lexer. Splits a template into text and tag tokens with
// jinja2's whitespace rules as Hugging Face transformers configures them (trim_blocks and
// lstrip_blocks on, a single trailing newline of the source dropped, "\r\n" and "\r" read as
// "\n"), plus the `-`/`+` modifiers of tags.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace snapkv::jinja {

/// 1-based position in the template source.
struct Pos {
  int line = 1;
  int col = 1;
};

enum class Tok {
  Text,        ///< literal template text (value)
  VarBegin,    ///< {{
  VarEnd,      ///< }}
  BlockBegin,  ///< {%
  BlockEnd,    ///< %}
  Name,        ///< identifier or keyword (value)
  String,      ///< string literal, escapes resolved (value)
  Int,         ///< integer literal (value: digits)
  Float,       ///< float literal (value)
  Op,          ///< operator or punctuation (value: "+", "//", "==", "(", ...)
  End,         ///< end of the source
};

struct Token {
  Tok type;
  std::string value;
  Pos pos;
};

/// Error thrown by the lexer, parser and evaluator: a message and the template position.
struct TemplateError {
  std::string message;
  Pos pos;
};

/// Tokens of `source`. Throws TemplateError for an unterminated tag, comment or string, an
/// unknown character, or a raw block without its end.
std::vector<Token> lex(std::string_view source);

}  // namespace snapkv::jinja
