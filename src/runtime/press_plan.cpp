// snapkv runtime: PressPlan from a PressSpec (see runtime/press_plan.h).
#include "runtime/press_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "snapkv/error.h"

namespace snapkv {
namespace {

int64_t to_int(const std::string& key, const std::string& v) {
  int64_t x = 0;
  const auto r = std::from_chars(v.data(), v.data() + v.size(), x);
  if (r.ec != std::errc() || r.ptr != v.data() + v.size())
    throw Error(fmt::format("press parameter {}: '{}' is not an integer", key, v));
  return x;
}

double to_real(const std::string& key, const std::string& v) {
  size_t used = 0;
  double x = 0;
  try {
    x = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || v.empty() || !std::isfinite(x))
    throw Error(fmt::format("press parameter {}: '{}' is not a number", key, v));
  return x;
}

PressConfig to_config(const PressSpec& spec) {
  PressConfig c;
  c.name = spec.name;
  if (c.name == "streamingllm") c.sinks = 4;
  for (const auto& [k, v] : spec.params) {
    if (k == "budget") {
      c.budget = to_int(k, v);
      if (c.budget < 1) throw Error(fmt::format("press parameter budget: {} must be >= 1", c.budget));
    } else if (k == "ratio") {
      c.compression_ratio = to_real(k, v);
    } else if (k == "window") {
      c.window = static_cast<int>(std::clamp<int64_t>(to_int(k, v), -1, int64_t{1} << 30));
    } else if (k == "kernel") {
      c.kernel = static_cast<int>(std::clamp<int64_t>(to_int(k, v), -1, int64_t{1} << 30));
    } else if (k == "sinks") {
      c.sinks = static_cast<int>(std::clamp<int64_t>(to_int(k, v), -1, int64_t{1} << 30));
    } else if (k == "pool") {
      if (v != "max" && v != "avg") throw Error(fmt::format("press parameter pool: '{}' is not max or avg", v));
      c.pool = v == "max" ? PoolType::Max : PoolType::Avg;
    } else if (k == "gqa_agg") {
      if (v != "mean" && v != "max" && v != "sum")
        throw Error(fmt::format("press parameter gqa_agg: '{}' is not mean, max or sum", v));
      c.gqa_agg = v == "mean" ? GQAAgg::Mean : v == "max" ? GQAAgg::Max : GQAAgg::Sum;
    } else if (k == "beta") {
      c.pyramid_beta = to_real(k, v);
    } else if (k == "alpha") {
      c.adakv_alpha = to_real(k, v);
    } else if (k == "seed") {
      c.seed = static_cast<uint64_t>(to_int(k, v));
    } else {
      throw Error(fmt::format("press {}: unknown parameter '{}'", spec.name, k));
    }
  }
  if (c.name != "none" && c.budget == 0 && c.compression_ratio < 0) c.budget = 1024;
  return c;
}

}  // namespace

void validate_press(const PressSpec& spec) { make_press(to_config(spec)); }

PressSpec to_spec(const PressConfig& c) {
  PressSpec s;
  s.name = c.name;
  if (s.name == "none") return s;
  if (c.compression_ratio >= 0) {
    s.set("ratio", fmt::format("{}", c.compression_ratio));
  } else if (c.budget != 0) {
    s.set("budget", std::to_string(c.budget));
  }
  s.set("window", std::to_string(c.window));
  const bool pooled = s.name == "snapkv" || s.name == "pyramidkv" || s.name == "adakv";
  if (pooled) {
    s.set("kernel", std::to_string(c.kernel));
    s.set("pool", c.pool == PoolType::Max ? "max" : "avg");
  }
  if (pooled || s.name == "tova" || s.name == "h2o")
    s.set("gqa_agg", c.gqa_agg == GQAAgg::Mean ? "mean" : c.gqa_agg == GQAAgg::Max ? "max" : "sum");
  if (s.name == "pyramidkv") s.set("beta", fmt::format("{}", c.pyramid_beta));
  if (s.name == "adakv") s.set("alpha", fmt::format("{}", c.adakv_alpha));
  if (s.name == "streamingllm") s.set("sinks", std::to_string(c.sinks));
  if (s.name == "random") s.set("seed", std::to_string(c.seed));
  return s;
}

PressPlan plan_press(const PressSpec& spec, int64_t n_tokens) {
  PressPlan p;
  const PressConfig c = to_config(spec);
  auto press = make_press(c);
  p.spec = spec.to_string();
  if (c.name == "none") return p;
  p.window = c.window;
  p.needs_all_queries = press->needs_all_queries();
  const int64_t min_keep = int64_t{c.window} + (c.name == "streamingllm" ? c.sinks : 0);
  if (n_tokens <= min_keep) {
    p.note = fmt::format("prompt of {} tokens is not longer than window {}{}: kept whole", n_tokens, c.window,
                         c.name == "streamingllm" ? fmt::format(" + sinks {}", c.sinks) : std::string());
    return p;
  }
  const int64_t cap = press_capacity(c, n_tokens);
  if (n_tokens <= cap) {
    p.note = fmt::format("prompt of {} tokens fits the budget of {}: kept whole", n_tokens, cap);
    return p;
  }
  p.press = std::move(press);
  p.compress = true;
  p.capacity = cap;
  return p;
}

// Placeholder PressSpec (the presses slice brings the full one).
PressSpec PressSpec::parse(std::string_view text) {
  PressSpec s;
  const size_t colon = text.find(':');
  s.name = std::string(text.substr(0, colon));
  if (s.name.empty()) throw Error(fmt::format("press spec '{}': no press name", text));
  if (colon == std::string_view::npos) return s;
  std::string_view rest = text.substr(colon + 1);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view kv = rest.substr(0, comma);
    const size_t eq = kv.find('=');
    if (eq == std::string_view::npos || eq == 0)
      throw Error(fmt::format("press spec '{}': '{}' is not key=value", text, kv));
    s.set(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return s;
}

std::string PressSpec::to_string() const {
  std::string out = name;
  for (size_t i = 0; i < params.size(); ++i) out += (i ? "," : ":") + params[i].first + "=" + params[i].second;
  return out;
}

void PressSpec::set(std::string key, std::string value) {
  for (auto& [k, v] : params)
    if (k == key) {
      v = std::move(value);
      return;
    }
  params.emplace_back(std::move(key), std::move(value));
}

std::optional<std::string> PressSpec::get(std::string_view key) const {
  for (const auto& [k, v] : params)
    if (k == key) return v;
  return std::nullopt;
}

}  // namespace snapkv
