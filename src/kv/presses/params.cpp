// snapkv presses: value parsing of the press keys (see params.h).
#include "kv/presses/params.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "kv/presses/scorer.h"
#include "snapkv/error.h"

namespace snapkv::press_detail {
namespace {

/// Parses the whole of `s` as a T with std::from_chars (no sign prefix '+', no spaces).
template <class T>
std::optional<T> parse_number(std::string_view s) {
  T v{};
  const char* end = s.data() + s.size();
  const auto [ptr, ec] = std::from_chars(s.data(), end, v);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return v;
}

std::string join(const std::vector<std::string>& v, std::string_view sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : std::string(sep)) + s;
  return out;
}

}  // namespace

std::string shown(std::string_view s, size_t max_bytes) {
  std::string out;
  const size_t n = std::min(s.size(), max_bytes);
  for (size_t i = 0; i < n; ++i) {
    const auto u = static_cast<unsigned char>(s[i]);
    if (u >= 0x20 && u < 0x7f) {
      out += s[i];
    } else {
      out += fmt::format("\\x{:02x}", u);
    }
  }
  if (n < s.size()) out += fmt::format("... ({} bytes)", s.size());
  return out;
}

std::optional<int64_t> parse_int(std::string_view s) { return parse_number<int64_t>(s); }
std::optional<uint64_t> parse_u64(std::string_view s) { return parse_number<uint64_t>(s); }
std::optional<double> parse_real(std::string_view s) { return parse_number<double>(s); }

ParamDef int_param(std::string key, int64_t def, int64_t lo, int64_t hi, std::string doc, bool odd) {
  ParamDef p;
  p.key = std::move(key);
  p.default_value = std::to_string(def);
  p.doc = std::move(doc);
  p.expect = hi == std::numeric_limits<int64_t>::max()
                 ? fmt::format("{} >= {}", odd ? "an odd integer" : "an integer", lo)
                 : fmt::format("{} in [{}, {}]", odd ? "an odd integer" : "an integer", lo, hi);
  p.canonical = [lo, hi, odd](std::string_view s) -> std::optional<std::string> {
    const auto v = parse_number<int64_t>(s);
    if (!v || *v < lo || *v > hi || (odd && *v % 2 == 0)) return std::nullopt;
    return std::to_string(*v);
  };
  return p;
}

ParamDef u64_param(std::string key, uint64_t def, std::string doc) {
  ParamDef p;
  p.key = std::move(key);
  p.default_value = std::to_string(def);
  p.doc = std::move(doc);
  p.expect = "an unsigned 64-bit integer";
  p.canonical = [](std::string_view s) -> std::optional<std::string> {
    const auto v = parse_number<uint64_t>(s);
    if (!v) return std::nullopt;
    return std::to_string(*v);
  };
  return p;
}

ParamDef real_param(std::string key, double def, double lo, double hi, bool hi_open, std::string doc) {
  ParamDef p;
  p.key = std::move(key);
  p.default_value = std::isnan(def) ? std::string() : fmt::format("{}", def);
  p.doc = std::move(doc);
  p.expect = std::isinf(hi) ? fmt::format("a finite number >= {}", lo)
                            : fmt::format("a number in [{}, {}{}", lo, hi, hi_open ? ")" : "]");
  p.canonical = [lo, hi, hi_open](std::string_view s) -> std::optional<std::string> {
    const auto v = parse_number<double>(s);
    if (!v || !std::isfinite(*v) || *v < lo || *v > hi || (hi_open && *v == hi)) return std::nullopt;
    return fmt::format("{}", *v == 0.0 ? 0.0 : *v);  // -0 reads as 0
  };
  return p;
}

ParamDef choice_param(std::string key, std::string def, std::vector<std::string> choices, std::string doc) {
  ParamDef p;
  p.key = std::move(key);
  p.default_value = std::move(def);
  p.doc = std::move(doc);
  p.expect = "one of " + join(choices, "|");
  p.canonical = [choices = std::move(choices)](std::string_view s) -> std::optional<std::string> {
    for (const auto& c : choices)
      if (c == s) return c;
    return std::nullopt;
  };
  return p;
}

ParamDef kernel_param() {
  return int_param("kernel", 7, 1, kMaxSpan, "SnapKV 1D pooling kernel over positions (odd; 1 = no pooling)", true);
}

ParamDef pool_param() {
  return choice_param("pool", "max", {"max", "avg"}, "SnapKV pooling: max, or avg (sum over the kernel / kernel)");
}

ParamDef gqa_agg_param() {
  return choice_param("gqa_agg", "mean", {"mean", "max", "sum"},
                      "reduction of the query heads' scores to their KV head");
}

std::string ParamValues::text(std::string_view key) const {
  auto v = spec_.get(key);
  if (!v)
    throw Error(fmt::format("press {}: internal error: key '{}' missing from the resolved spec", spec_.name, key));
  return *v;
}

int64_t ParamValues::integer(std::string_view key) const {
  const auto v = parse_number<int64_t>(text(key));
  if (!v) throw Error(fmt::format("press {}: internal error: key '{}' is not an integer", spec_.name, key));
  return *v;
}

uint64_t ParamValues::u64(std::string_view key) const {
  const auto v = parse_number<uint64_t>(text(key));
  if (!v) throw Error(fmt::format("press {}: internal error: key '{}' is not an unsigned integer", spec_.name, key));
  return *v;
}

double ParamValues::real(std::string_view key) const {
  const auto v = parse_number<double>(text(key));
  if (!v) throw Error(fmt::format("press {}: internal error: key '{}' is not a number", spec_.name, key));
  return *v;
}

PoolType pool_type(const ParamValues& p) { return p.text("pool") == "avg" ? PoolType::Avg : PoolType::Max; }

GQAAgg gqa_agg(const ParamValues& p) {
  const std::string a = p.text("gqa_agg");
  return a == "max" ? GQAAgg::Max : a == "sum" ? GQAAgg::Sum : GQAAgg::Mean;
}

}  // namespace snapkv::press_detail
