// snapkv chat templates: Python string operations on Str (see jinja_text.h).
#include "chat/jinja_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>

namespace snapkv::jinja {

namespace {

uint32_t decode_at(std::string_view s, size_t b, size_t e) {
  const auto c0 = static_cast<unsigned char>(s[b]);
  const size_t n = e - b;
  if (n == 1) return c0;
  uint32_t cp = c0 & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
  for (size_t k = b + 1; k < e; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[k]) & 0x3F);
  return cp;
}

// Python's str.isspace().
bool py_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

struct CodePoints {
  std::vector<size_t> off;
  std::vector<uint32_t> cp;
};

CodePoints code_points(std::string_view s) {
  CodePoints c;
  c.off = code_point_offsets(s);
  for (size_t k = 0; k + 1 < c.off.size(); ++k) c.cp.push_back(decode_at(s, c.off[k], c.off[k + 1]));
  return c;
}

bool is_upper(uint32_t c) {
  return (c >= 'A' && c <= 'Z') || (c >= 0xC0 && c <= 0xDE && c != 0xD7) ||
         (c >= 0x100 && c <= 0x17F && c != 0x138 && c != 0x149 && c != 0x17F &&
          ((c <= 0x137 || c >= 0x14A) ? c % 2 == 0 : c % 2 == 1)) ||
         (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) || c == 0x386 || (c >= 0x388 && c <= 0x38A) || c == 0x38C ||
         c == 0x38E || c == 0x38F || (c >= 0x400 && c <= 0x42F);
}

// Greek letters with tonos: lower -> upper.
uint32_t greek_tonos_upper(uint32_t c) {
  switch (c) {
    case 0x3AC:
      return 0x386;
    case 0x3AD:
      return 0x388;
    case 0x3AE:
      return 0x389;
    case 0x3AF:
      return 0x38A;
    case 0x3CC:
      return 0x38C;
    case 0x3CD:
      return 0x38E;
    case 0x3CE:
      return 0x38F;
    default:
      return 0;
  }
}

bool is_lower(uint32_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 0xDF && c <= 0xFF && c != 0xF7) ||
         (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x178 && !is_upper(c)) || (c >= 0x3AC && c <= 0x3CE) ||
         (c >= 0x430 && c <= 0x45F);
}

uint32_t to_upper(uint32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return c - 32;
  if (c == 0xFF) return 0x178;
  if (c >= 0x100 && c <= 0x17F && is_lower(c) && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) return c - 1;
  if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;
  if (c == 0x3C2) return 0x3A3;
  if (const uint32_t t = greek_tonos_upper(c)) return t;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  return c;
}

uint32_t to_lower(uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  if (c == 0x178) return 0xFF;
  if (c >= 0x100 && c <= 0x17F && is_upper(c) && c != 0x130) return c + 1;
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  for (uint32_t l = 0x3AC; l <= 0x3CE; ++l) {
    if (greek_tonos_upper(l) == c) return l;
  }
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}

bool is_cased(uint32_t c) { return is_upper(c) || is_lower(c); }

bool word_separator(uint32_t c) { return py_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<'; }

void json_string(std::string& out, std::string_view s) {
  out += '"';
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          out += fmt::format("\\u{:04x}", c);
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

void json_value(std::string& out, const Value& v, const JsonOptions& o, int level, std::string& error) {
  if (!error.empty()) return;
  if (level > 512) {
    error = "tojson: value nests too deeply";
    return;
  }
  auto newline = [&](int lvl) {
    if (o.indent) {
      out += '\n';
      out.append(static_cast<size_t>(*o.indent) * static_cast<size_t>(lvl), ' ');
    }
  };
  switch (v.kind) {
    case Value::Kind::None:
      out += "null";
      return;
    case Value::Kind::Bool:
      out += v.b ? "true" : "false";
      return;
    case Value::Kind::Int:
      out += std::to_string(v.i);
      return;
    case Value::Kind::Float:
      if (std::isnan(v.f)) {
        out += "NaN";
      } else if (std::isinf(v.f)) {
        out += v.f > 0 ? "Infinity" : "-Infinity";
      } else {
        out += float_repr(v.f);
      }
      return;
    case Value::Kind::String:
      json_string(out, v.str());
      return;
    case Value::Kind::List: {
      if (v.a->empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t k = 0; k < v.a->size(); ++k) {
        if (k > 0) out += o.item_sep;
        newline(level + 1);
        json_value(out, (*v.a)[k], o, level + 1, error);
        check_string_growth(out.size());
      }
      newline(level);
      out += ']';
      return;
    }
    case Value::Kind::Dict: {
      if (v.is_namespace) {
        error = "tojson: Object of type Namespace is not JSON serializable";
        return;
      }
      if (v.o->items.empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : v.o->items) items.push_back(&kv);
      if (o.sort_keys) {
        std::stable_sort(items.begin(), items.end(), [](const auto* a, const auto* b) { return a->first < b->first; });
      }
      out += '{';
      for (size_t k = 0; k < items.size(); ++k) {
        if (k > 0) out += o.item_sep;
        newline(level + 1);
        json_string(out, items[k]->first);
        out += o.key_sep;
        json_value(out, items[k]->second, o, level + 1, error);
        check_string_growth(out.size());
      }
      newline(level);
      out += '}';
      return;
    }
    case Value::Kind::Undefined:
      error = "tojson: Object of type Undefined is not JSON serializable";
      return;
    case Value::Kind::Function:
      error = "tojson: Object of type function is not JSON serializable";
      return;
  }
}

}  // namespace

void encode_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

Str py_strip(const Str& s, StripSide side, const std::string* chars) {
  const CodePoints c = code_points(s.text());
  std::vector<uint32_t> set;
  if (chars != nullptr) set = code_points(*chars).cp;
  auto strip = [&](uint32_t x) {
    return chars == nullptr ? py_space(x) : std::find(set.begin(), set.end(), x) != set.end();
  };
  size_t b = 0;
  size_t e = c.cp.size();
  if (side != StripSide::Right) {
    while (b < e && strip(c.cp[b])) ++b;
  }
  if (side != StripSide::Left) {
    while (e > b && strip(c.cp[e - 1])) --e;
  }
  return s.substr(c.off[b], c.off[e] - c.off[b]);
}

std::vector<Str> py_split(const Str& s, const std::string* sep, int64_t maxsplit) {
  std::vector<Str> out;
  const std::string& t = s.text();
  if (sep != nullptr) {
    size_t from = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      const size_t at = t.find(*sep, from);
      if (at == std::string::npos) break;
      out.push_back(s.substr(from, at - from));
      from = at + sep->size();
    }
    out.push_back(s.substr(from, t.size() - from));
    return out;
  }
  const CodePoints c = code_points(t);
  size_t k = 0;
  const size_t n = c.cp.size();
  while (true) {
    while (k < n && py_space(c.cp[k])) ++k;
    if (k >= n) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
      size_t e = n;
      while (e > k && py_space(c.cp[e - 1])) --e;
      out.push_back(s.substr(c.off[k], c.off[e] - c.off[k]));
      break;
    }
    const size_t b = k;
    while (k < n && !py_space(c.cp[k])) ++k;
    out.push_back(s.substr(c.off[b], c.off[k] - c.off[b]));
  }
  return out;
}

Str py_replace(const Str& s, std::string_view old, const Str& repl, int64_t count) {
  Str out;
  const std::string& t = s.text();
  // The result's size first: a short string with a long replacement could be far larger than
  // either (the render's string limit, check_string_growth).
  {
    size_t n = 0;
    if (old.empty()) {
      n = code_point_offsets(t).size();  // code points + 1 places
    } else {
      for (size_t at = t.find(old); at != std::string::npos; at = t.find(old, at + old.size())) ++n;
    }
    if (count >= 0) n = std::min(n, static_cast<size_t>(count));
    const double bytes = static_cast<double>(t.size()) +
                         static_cast<double>(n) * (static_cast<double>(repl.size()) - static_cast<double>(old.size()));
    check_string_growth(bytes > 1e18 ? SIZE_MAX : static_cast<size_t>(bytes));
  }
  if (old.empty()) {  // Python inserts `repl` between every code point and at both ends
    const std::vector<size_t> off = code_point_offsets(t);
    int64_t done = 0;
    for (size_t k = 0; k + 1 < off.size(); ++k) {
      if (count < 0 || done < count) {
        out.append(repl);
        ++done;
      }
      out.append(s.substr(off[k], off[k + 1] - off[k]));
    }
    if (count < 0 || done < count) out.append(repl);
    return out;
  }
  size_t from = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t at = t.find(old, from);
    if (at == std::string::npos) break;
    out.append(s.substr(from, at - from));
    out.append(repl);
    from = at + old.size();
    ++done;
  }
  out.append(s.substr(from, t.size() - from));
  return out;
}

Str py_case(const Str& s, CaseMap m) {
  const CodePoints c = code_points(s.text());
  std::string out;
  out.reserve(s.size());
  bool prev_cased = false;
  for (size_t k = 0; k < c.cp.size(); ++k) {
    const uint32_t x = c.cp[k];
    uint32_t y = x;
    switch (m) {
      case CaseMap::Upper:
        y = to_upper(x);
        break;
      case CaseMap::Lower:
        y = to_lower(x);
        break;
      case CaseMap::Title:
        y = prev_cased ? to_lower(x) : to_upper(x);
        break;
      case CaseMap::TitleWords:
        y = (k == 0 || word_separator(c.cp[k - 1])) ? to_upper(x) : to_lower(x);
        break;
      case CaseMap::Capitalize:
        y = k == 0 ? to_upper(x) : to_lower(x);
        break;
    }
    prev_cased = is_cased(x);
    const size_t len = c.off[k + 1] - c.off[k];
    std::string enc;
    encode_utf8(enc, y);
    // Keep invalid bytes and anything whose mapping would change the length as it is.
    if (enc.size() == len && !(len == 1 && x >= 0x80)) {
      out += enc;
    } else {
      out.append(s.text(), c.off[k], len);
    }
  }
  Str mapped(std::move(out));
  Str result;
  size_t at = 0;
  for (const Range& d : s.data_ranges()) {
    result.append(mapped.substr(at, d.begin - at));
    result.append_data(std::string_view(mapped.text()).substr(d.begin, d.end - d.begin));
    at = d.end;
  }
  result.append(mapped.substr(at, mapped.size() - at));
  return result;
}

std::string py_json(const Value& v, const JsonOptions& o, std::string& error) {
  std::string out;
  json_value(out, v, o, 0, error);
  return out;
}

// Python's int(s, base) for base 0 or 2..36 (jinja2's int filter with base != 10): optional
// whitespace and sign, a prefix 0x / 0o / 0b matching the base (base 0: any of them, else
// decimal), digits with single underscores between them. False when s is not such a number;
// `overflow` set when it is one beyond 64 bits.
bool py_int_base(const std::string& text, int base, int64_t& out, bool& overflow) {
  const std::string& s = text;
  size_t k = 0;
  const bool neg = !s.empty() && s[0] == '-';
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) k = 1;
  auto prefix = [&](char c) {
    return s.size() >= k + 2 && s[k] == '0' && (s[k + 1] == c || s[k + 1] == static_cast<char>(c - 32));
  };
  int b = base;
  for (const auto& [c, pb] : {std::pair{'x', 16}, std::pair{'o', 8}, std::pair{'b', 2}}) {
    if ((base == 0 || base == pb) && prefix(c)) {
      b = pb;
      k += 2;
      if (k < s.size() && s[k] == '_') ++k;  // Python allows one underscore after the prefix
      break;
    }
  }
  if (b == 0) {
    b = 10;
    if (s.size() > k + 1 && s[k] == '0' && s.find_first_not_of("0_", k) != std::string::npos) return false;
  }
  std::string digits;
  for (size_t i = k; i < s.size(); ++i) {
    if (s[i] == '_') {
      if (i == k || i + 1 == s.size() || s[i + 1] == '_') return false;
      continue;
    }
    digits.push_back(s[i]);
  }
  if (digits.empty()) return false;
  uint64_t u = 0;
  const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), u, b);
  if (r.ptr != digits.data() + digits.size()) return false;
  overflow = r.ec == std::errc::result_out_of_range || u > (neg ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1);
  if (r.ec != std::errc() && !overflow) return false;
  out = overflow ? 0 : (neg ? static_cast<int64_t>(0 - u) : static_cast<int64_t>(u));
  return true;
}

bool py_float(const std::string& text, double& out) {
  // strtod also reads C99 hex floats ("0x1A" = 26.0) and "infinity"-like words Python reads too;
  // Python's float() reads no hex. Single underscores between digits are Python's (PEP 515).
  // "nan(...)" too, which strtod reads and Python does not.
  if (text.empty() || text.find_first_of("xX(") != std::string::npos) return false;
  std::string s;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '_') {
      s.push_back(text[i]);
      continue;
    }
    const auto digit = [](char c) { return c >= '0' && c <= '9'; };
    if (i == 0 || i + 1 == text.size() || !digit(text[i - 1]) || !digit(text[i + 1])) return false;
  }
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end != s.c_str() && *end == '\0';
}

SliceBytes py_slice_bytes(const std::string& t, std::optional<int64_t> start, std::optional<int64_t> end) {
  SliceBytes r{0, t.size(), false};
  if (!start && !end) return r;
  const std::vector<size_t> off = code_point_offsets(t);
  const auto n = static_cast<int64_t>(off.size()) - 1;
  const auto index = [&](std::optional<int64_t> x, int64_t dflt) {
    if (!x) return dflt;
    return *x < 0 ? std::max<int64_t>(0, *x + n) : *x;  // *x + n: n is far below 2^62
  };
  const int64_t b = index(start, 0);
  const int64_t e = std::min(index(end, n), n);
  r.past_end = e < b;  // also b beyond the string, since e <= n
  const int64_t bc = std::min(b, n);
  r.begin = off[static_cast<size_t>(bc)];
  r.end = off[static_cast<size_t>(std::max(e, bc))];
  return r;
}

}  // namespace snapkv::jinja
