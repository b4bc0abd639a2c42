#include "cli/flag_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "snapkv/error.h"
#include "snapkv/kv_type.h"
#include "snapkv/prefill_attention.h"
#include "snapkv/press_spec.h"

namespace snapkv::cli {

namespace {

// Length of the valid UTF-8 sequence starting at s[i] (RFC 3629: no overlong forms, no
// surrogates, at most U+10FFFF), or 0 if the bytes there are not one.
size_t utf8_len(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;  // overlong
    if (c == 0xED) hi = 0x9F;  // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;  // overlong
    if (c == 0xF4) hi = 0x8F;  // > U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
  }
  return n;
}

}  // namespace

CLI::Validator int_in(int64_t lo, int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& v) -> std::string {
        int64_t x = 0;
        const char* end = v.data() + v.size();
        const auto [p, ec] = std::from_chars(v.data(), end, x);
        if (v.empty() || ec != std::errc() || p != end || x < lo || x > hi) {
          return fmt::format("must be an integer in [{}, {}], got '{}'", lo, hi, printable(v));
        }
        return "";
      },
      fmt::format("INT in [{}, {}]", lo, hi));
}

CLI::Validator uint64_any() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        uint64_t x = 0;
        const char* end = v.data() + v.size();
        const auto [p, ec] = std::from_chars(v.data(), end, x);
        if (v.empty() || ec != std::errc() || p != end) {
          return fmt::format("must be an integer in [0, {}], got '{}'", UINT64_MAX, printable(v));
        }
        return "";
      },
      fmt::format("UINT in [0, {}]", UINT64_MAX));
}

CLI::Validator real_in(double lo, double hi, bool lo_open, bool hi_open) {
  const std::string range = fmt::format("{}{}, {}{}", lo_open ? "(" : "[", lo, hi, hi_open ? ")" : "]");
  return CLI::Validator(
      [lo, hi, lo_open, hi_open, range](std::string& v) -> std::string {
        char* end = nullptr;
        const double x = v.empty() ? std::nan("") : std::strtod(v.c_str(), &end);
        const bool parsed = !v.empty() && end == v.c_str() + v.size();
        if (!parsed || !std::isfinite(x) || x < lo || x > hi || (lo_open && x == lo) || (hi_open && x == hi)) {
          return fmt::format("must be a number in {}, got '{}'", range, printable(v));
        }
        return "";
      },
      "FLOAT in " + range);
}

CLI::Validator press_arg() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        if (v.empty()) return "must be a press name (none, snapkv, ...) or a press spec name:key=value,..., got ''";
        try {
          const PressSpec spec = PressSpec::parse(v);
          if (v.find(':') == std::string::npos) {
            const auto names = press_names();
            if (std::find(names.begin(), names.end(), v) == names.end()) {
              std::string all;
              for (const auto& n : names) all += (all.empty() ? "" : "|") + n;
              return fmt::format("must be one of {} (or a press spec name:key=value,...), got '{}'", all, printable(v));
            }
          }
          validate_press_spec(spec);
        } catch (const Error& e) {
          return printable(e.what());
        }
        return "";
      },
      "PRESS");
}

CLI::Validator kv_type_arg() {
  return one_of(
      {kv_type_name(KVType::F16), kv_type_name(KVType::F32), kv_type_name(KVType::Q8_0), kv_type_name(KVType::Q4_0)});
}

CLI::Validator prefill_attention_arg() {
  return one_of({prefill_attention_name(PrefillAttention::Exact), prefill_attention_name(PrefillAttention::BF16),
                 prefill_attention_name(PrefillAttention::Int8)});
}

CLI::Validator one_of(const std::vector<std::string>& names) {
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : "|") + n;
  return CLI::Validator(
      [names, list](std::string& v) -> std::string {
        for (const auto& n : names) {
          if (v == n) return "";
        }
        return fmt::format("must be one of {}, got '{}'", list, printable(v));
      },
      list);
}

CLI::Validator non_empty(const std::string& what) {
  return CLI::Validator(
      [what](std::string& v) -> std::string { return v.empty() ? fmt::format("must not be empty ({})", what) : ""; },
      "");
}

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    const size_t n = utf8_len(text, i);
    // C0 controls, DEL and the C1 controls U+0080..U+009F (UTF-8 C2 80..C2 9F).
    const bool c1 = n == 2 && c == 0xC2 && static_cast<unsigned char>(text[i + 1]) <= 0x9F;
    if (n == 0 || c < 0x20 || c == 0x7F || c1) {
      for (size_t k = 0; k < (c1 ? 2 : 1); ++k)
        out += fmt::format("\\x{:02X}", static_cast<unsigned char>(text[i + k]));
      i += c1 ? 2 : 1;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

}  // namespace snapkv::cli
