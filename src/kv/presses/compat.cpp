// snapkv presses: the flat PressConfig path (make_press(PressConfig), press_capacity(), to_spec(),
// declared in kv/presses/press.h), kept with its flag-named messages (--press, --budget,
// --compression-ratio, --window, --kernel, --sinks) until the engine and the CLI pass PressSpecs.
#include <fmt/format.h>

#include <cmath>

#include "kv/presses/params.h"
#include "kv/presses/press.h"
#include "snapkv/error.h"

namespace snapkv {
namespace {

using press_detail::kMaxSpan;

/// The documented default of compression_ratio meaning "not set".
constexpr double kRatioUnset = -1.0;

bool budget_set(const PressConfig& c) { return c.budget != 0; }
bool ratio_set(const PressConfig& c) { return c.compression_ratio != kRatioUnset; }

/// Tokens a press must be able to keep: the window, plus the sinks for streamingllm.
int64_t min_keep(const PressConfig& c) { return int64_t{c.window} + (c.name == "streamingllm" ? int64_t{c.sinks} : 0); }

/// Throws snapkv::Error for the first invalid setting (see make_press(const PressConfig&)).
void validate(const PressConfig& c) {
  bool known = false;
  for (const auto& n : press_names()) known = known || n == c.name;
  if (!known) {
    std::string valid;
    for (const auto& n : press_names()) valid += (valid.empty() ? "" : ", ") + n;
    throw Error(fmt::format("--press: unknown press '{}' (valid: {})", c.name, valid));
  }
  if (c.window < 1 || c.window > kMaxSpan)
    throw Error(fmt::format("--window must be in [1, {}], got {}", kMaxSpan, c.window));
  if (c.kernel < 1 || c.kernel > kMaxSpan || c.kernel % 2 == 0)
    throw Error(fmt::format("--kernel must be odd and in [1, {}], got {}", kMaxSpan, c.kernel));
  if (c.span_gap < 0 || c.span_gap > kMaxSpan)
    throw Error(fmt::format("--span-gap must be in [0, {}], got {}", kMaxSpan, c.span_gap));
  if (c.name == "none") return;  // keeps everything: budget and ratio are ignored
  if (budget_set(c) == ratio_set(c))
    throw Error(fmt::format("press {}: set exactly one of --budget and --compression-ratio (got {})", c.name,
                            budget_set(c) ? "both" : "neither"));
  if (ratio_set(c) && !(c.compression_ratio >= 0.0 && c.compression_ratio < 1.0))
    throw Error(fmt::format("--compression-ratio must be in [0, 1), got {}", c.compression_ratio));
  if (c.name == "streamingllm" && (c.sinks < 0 || c.sinks > kMaxSpan))
    throw Error(fmt::format("--sinks must be in [0, {}], got {}", kMaxSpan, c.sinks));
  if (budget_set(c) && c.budget < min_keep(c)) {
    if (c.name == "streamingllm")
      throw Error(fmt::format("--budget {} is smaller than --window {} + --sinks {} (press streamingllm)", c.budget,
                              c.window, c.sinks));
    throw Error(fmt::format("--budget {} is smaller than --window {} (the window is always kept)", c.budget, c.window));
  }
  if (c.name == "pyramidkv" && !(c.pyramid_beta >= 1.0 && std::isfinite(c.pyramid_beta)))
    throw Error(fmt::format("pyramid_beta must be a finite number >= 1, got {}", c.pyramid_beta));
  if (c.name == "adakv" && !(c.adakv_alpha >= 0.0 && c.adakv_alpha <= 1.0))
    throw Error(fmt::format("adakv_alpha must be in [0, 1], got {}", c.adakv_alpha));
}

std::string pool_text(PoolType p) { return p == PoolType::Max ? "max" : "avg"; }

std::string agg_text(GQAAgg a) {
  switch (a) {
    case GQAAgg::Max:
      return "max";
    case GQAAgg::Sum:
      return "sum";
    case GQAAgg::Mean:
      break;
  }
  return "mean";
}

}  // namespace

PressSpec to_spec(const PressConfig& c) {
  PressSpec s;
  s.name = c.name;
  if (c.name == "none") return s;
  if (budget_set(c))
    s.set("budget", std::to_string(c.budget));
  else
    s.set("ratio", fmt::format("{}", c.compression_ratio));  // shortest text that reads back exactly
  s.set("window", std::to_string(c.window));
  if (c.name == "streamingllm") s.set("sinks", std::to_string(c.sinks));
  if (c.name == "snapkv" || c.name == "pyramidkv" || c.name == "adakv") {
    s.set("kernel", std::to_string(c.kernel));
    s.set("pool", pool_text(c.pool));
  }
  if (c.name == "snapkv" || c.name == "pyramidkv" || c.name == "adakv" || c.name == "h2o" || c.name == "tova")
    s.set("gqa_agg", agg_text(c.gqa_agg));
  if (c.name == "pyramidkv") s.set("beta", fmt::format("{}", c.pyramid_beta));
  if (c.name == "adakv") s.set("alpha", fmt::format("{}", c.adakv_alpha));
  if (c.name == "random") s.set("seed", std::to_string(c.seed));
  if (c.span_gap > 0) s.set("span_gap", std::to_string(c.span_gap));
  return s;
}

std::unique_ptr<Press> make_press(const PressConfig& cfg) {
  validate(cfg);
  return make_press(to_spec(cfg));
}

int64_t press_capacity(const PressConfig& cfg, int64_t n_tokens) {
  validate(cfg);
  if (n_tokens < 0) throw Error(fmt::format("press_capacity: n_tokens = {} must be >= 0", n_tokens));
  if (cfg.name == "none") return n_tokens;
  int64_t cap = cfg.budget;
  if (!budget_set(cfg)) {
    // kvpress convention: remove floor(L * ratio) positions. A ratio that would leave fewer
    // than the window (+ sinks) is an error, exactly like a --budget below the window: the
    // window is never silently evicted nor the ratio silently weakened.
    cap = n_tokens - static_cast<int64_t>(std::floor(static_cast<double>(n_tokens) * cfg.compression_ratio));
    if (n_tokens > cap && cap < min_keep(cfg)) {
      throw Error(fmt::format(
          "press {}: --compression-ratio {} leaves {} of {} prompt tokens per KV head, fewer than the --window {}{} "
          "that is always kept (use a smaller ratio or window)",
          cfg.name, cfg.compression_ratio, cap, n_tokens, cfg.window,
          cfg.name == "streamingllm" ? fmt::format(" + --sinks {}", cfg.sinks) : std::string()));
    }
  }
  if (n_tokens > cap && cfg.window >= n_tokens)
    throw Error(fmt::format("press {}: --window {} must be smaller than the prompt ({} tokens) to compress it to {}",
                            cfg.name, cfg.window, n_tokens, cap));
  return cap;
}

}  // namespace snapkv
