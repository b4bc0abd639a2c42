// snapkv chat templates: Python's string operations on data-marked strings (Str), as jinja2's
// filters and str methods do them: whitespace per str.isspace(), case mapping, split, replace,
// and json.dumps as Hugging Face's tojson calls it (ensure_ascii=False).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/jinja_value.h"

namespace snapkv::jinja {

enum class StripSide { Both, Left, Right };

/// Appends code point `cp` (at most U+10FFFF) to `out` as UTF-8.
void encode_utf8(std::string& out, uint32_t cp);

/// str.strip()/lstrip()/rstrip(): `chars` null strips Unicode whitespace, else those code points.
Str py_strip(const Str& s, StripSide side, const std::string* chars);
/// str.split(sep, maxsplit): sep null splits on whitespace runs (no empty parts).
std::vector<Str> py_split(const Str& s, const std::string* sep, int64_t maxsplit);
/// str.replace(old, new, count) (count < 0: all).
Str py_replace(const Str& s, std::string_view old, const Str& repl, int64_t count);

/// Title: str.title() (a letter after a cased letter is lowered); TitleWords: jinja2's `title`
/// filter (the first character after whitespace or one of "-({[<" is raised, the rest lowered).
enum class CaseMap { Upper, Lower, Title, TitleWords, Capitalize };
/// str.upper()/lower()/title()/capitalize() for ASCII, Latin-1, Latin Extended-A, Greek and
/// Cyrillic letters (one-to-one mappings of the same UTF-8 length, so data ranges stay put);
/// other code points are left as they are.
Str py_case(const Str& s, CaseMap m);

/// Options of json.dumps as HF's tojson filter passes them.
struct JsonOptions {
  std::optional<int> indent;  ///< none: one line
  std::string item_sep;       ///< default ", " (", " without indent, "," with)
  std::string key_sep = ": ";
  bool sort_keys = false;
};
/// json.dumps(v, ensure_ascii=False, ...). For a value JSON cannot hold (undefined, a callable,
/// a namespace) sets `error` to a message and returns what was written so far.
std::string py_json(const Value& v, const JsonOptions& o, std::string& error);

/// Python's int(text, base) for base 0 or 2..36 (text already stripped): optional sign, a prefix
/// 0x / 0o / 0b matching the base (base 0: any, else decimal without leading zeros), digits with
/// single underscores between them. False when text is not such a number; true with `overflow`
/// set when it is one beyond int64 (`out` is then 0).
bool py_int_base(const std::string& text, int base, int64_t& out, bool& overflow);

/// Python's float(text) for text already stripped: what strtod reads (decimal, exponent, inf,
/// nan) with single underscores between digits, but no hex. False when text is not such a number.
bool py_float(const std::string& text, double& out);

/// The bytes [begin, end) of text[start:end] (a Python slice of code points: absent = the whole
/// string, negative = from the end, clamped). past_end: start lies beyond the string or after
/// end, where Python's find / count / startswith find nothing, even an empty needle.
struct SliceBytes {
  size_t begin = 0, end = 0;
  bool past_end = false;
};
SliceBytes py_slice_bytes(const std::string& text, std::optional<int64_t> start, std::optional<int64_t> end);

}  // namespace snapkv::jinja
