// snapkv presses: the registry, spec validation and make_press(PressSpec) (declared in
// snapkv/press_spec.h and kv/presses/press.h). A spec is resolved into its canonical form (every
// key of the press with its value) once; the press is built from that form only.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <utility>

#include "kv/presses/press_base.h"
#include "kv/presses/scorer.h"
#include "snapkv/error.h"

namespace snapkv {
namespace press_detail {
namespace {

/// Every press of SNAPKV_PRESS_REGISTRY, in help order.
const std::vector<const PressDef*>& registry() {
#define SNAPKV_PRESS_ENTRY(name) &name##_press(),
  static const std::vector<const PressDef*> r = {SNAPKV_PRESS_REGISTRY(SNAPKV_PRESS_ENTRY)};
#undef SNAPKV_PRESS_ENTRY
  return r;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

const PressDef& find_def(std::string_view name) {
  for (const PressDef* d : registry())
    if (d->name == name) return *d;
  throw Error(fmt::format("unknown press '{}' (valid: {})", shown(name), join(press_names())));
}

/// `window`: an integer W in [1, 2^24], or `question` (the question-aligned window, issue 11).
ParamDef window_param() {
  ParamDef p = int_param("window", 32, 1, kMaxSpan,
                         "W: observation window (its queries score the prompt); the last W positions are always "
                         "kept; `question`: the prompt's question span (the last user turn and the template's "
                         "closing tokens, as the caller gives it) clamped to [window_min, window_max]");
  p.expect += " or question";
  p.canonical = [int_canonical = p.canonical](std::string_view v) -> std::optional<std::string> {
    if (v == "question") return std::string(v);
    return int_canonical(v);
  };
  return p;
}

/// The keys every compressing press has, with this press's defaults of sinks and alloc.
std::vector<ParamDef> common_params(const PressDef& d) {
  const double inf = std::numeric_limits<double>::infinity();
  return {
      int_param("budget", 1024, 1, std::numeric_limits<int64_t>::max(),
                "C: tokens kept per KV head, window and sinks included (SnapKV's convention); used when ratio is not "
                "set"),
      real_param("ratio", std::nan(""), 0.0, 1.0, true,
                 "fraction of the prompt positions removed (kvpress's convention): C = L - floor(L * ratio); "
                 "excludes budget"),
      window_param(),
      int_param("window_min", 8, 1, kMaxSpan,
                "window=question only: the fewest window queries (a shorter question takes the prompt tokens before "
                "it too)"),
      int_param("window_max", 64, 1, kMaxSpan,
                "window=question only: the most window queries (a longer question votes with its last window_max "
                "tokens)"),
      int_param("sinks", d.sinks, 0, kMaxSpan, "S: the first S positions (attention sinks) are always kept"),
      choice_param("alloc", d.alloc, {"uniform", "pyramid", "ada"},
                   "budget allocator: uniform (C per KV head), pyramid (PyramidKV: per layer, decreasing with "
                   "depth), ada (AdaKV: shared by the KV heads of a layer)"),
      real_param("beta", 20, 1.0, inf, false,
                 "alloc=pyramid only: the last compressed layer keeps (C-W-S)/beta free tokens per head, the first "
                 "2(C-W-S) minus that (Cai et al. 2024, arXiv 2406.02069)"),
      real_param("alpha", 0.2, 0.0, 1.0, false,
                 "alloc=ada only: safeguard fraction, each head first keeps its own floor(alpha (C-W-S)) best "
                 "(Feng et al. 2024, arXiv 2407.11550)"),
      int_param("span_gap", 0, 0, kMaxSpan,
                "G: span-preserving selection, holes of up to G positions between kept ones are kept too and paid "
                "for by the lowest-scored run ends, same budget (0: plain top-k, the paper's selection)"),
  };
}

/// A spec checked and completed: the press, its canonical spec and its common settings.
struct Resolved {
  const PressDef* def = nullptr;
  PressSpec canonical;
  PressSettings settings;
};

Resolved resolve(const PressSpec& spec) {
  const PressDef& def = find_def(spec.name);
  Resolved r;
  r.def = &def;
  r.canonical.name = def.name;
  if (!def.make) {
    if (!spec.params.empty())
      throw Error(fmt::format("press {} takes no settings (got {}={})", def.name, shown(spec.params[0].first),
                              shown(spec.params[0].second)));
    return r;
  }
  const std::vector<ParamDef> common = common_params(def);
  std::vector<const ParamDef*> keys;
  for (const auto& p : common) keys.push_back(&p);
  for (const auto& p : def.params) keys.push_back(&p);

  // Every given key: known to this press, once, with a valid value (canonical text kept).
  std::vector<std::pair<std::string, std::string>> given;
  const auto find_given = [&](std::string_view key) -> std::optional<std::string> {
    for (const auto& [k, v] : given)
      if (k == key) return v;
    return std::nullopt;
  };
  for (const auto& [k, v] : spec.params) {
    const ParamDef* p = nullptr;
    for (const ParamDef* q : keys)
      if (q->key == k) p = q;
    if (p == nullptr) {
      std::vector<std::string> valid;
      for (const ParamDef* q : keys) valid.push_back(q->key);
      throw Error(fmt::format("press {}: unknown key '{}' (valid keys: {})", def.name, shown(k), join(valid)));
    }
    if (find_given(k)) throw Error(fmt::format("press {}: key '{}' given twice", def.name, shown(k)));
    const auto c = p->canonical(v);
    if (!c) throw Error(fmt::format("press {}: invalid value {}={} (expected {})", def.name, k, shown(v), p->expect));
    given.emplace_back(k, *c);
  }

  // Cross-key rules.
  const std::string alloc = find_given("alloc").value_or(def.alloc);
  if (find_given("beta") && alloc != "pyramid")
    throw Error(fmt::format("press {}: beta applies only to alloc=pyramid (alloc is {})", def.name, alloc));
  if (find_given("alpha") && alloc != "ada")
    throw Error(fmt::format("press {}: alpha applies only to alloc=ada (alloc is {})", def.name, alloc));
  const bool question = find_given("window") == std::optional<std::string>("question");
  for (const char* k : {"window_min", "window_max"})
    if (find_given(k) && !question)
      throw Error(fmt::format("press {}: {} applies only to window=question (window is {})", def.name, k,
                              find_given("window").value_or("32")));
  const auto budget = find_given("budget"), ratio = find_given("ratio");
  if (budget && ratio)
    throw Error(
        fmt::format("press {}: set budget or ratio, not both (got budget={}, ratio={})", def.name, *budget, *ratio));
  const auto value = [&](const ParamDef& p) { return find_given(p.key).value_or(p.default_value); };
  const auto common_int = [&](std::string_view key) {
    for (const ParamDef& p : common)
      if (p.key == key) return parse_int(value(p)).value();  // canonical: always an integer
    throw Error(fmt::format("press {}: internal error: no common key '{}'", def.name, key));
  };
  PressSettings& s = r.settings;
  s.compresses = true;
  if (question) {
    s.question_window = true;
    s.window_min = static_cast<int>(common_int("window_min"));
    s.window = static_cast<int>(common_int("window_max"));
    if (s.window_min > s.window)
      throw Error(
          fmt::format("press {}: window_min={} is larger than window_max={}", def.name, s.window_min, s.window));
  } else {
    s.window = static_cast<int>(common_int("window"));
  }
  s.sinks = common_int("sinks");
  s.span_gap = common_int("span_gap");
  if (ratio) {
    s.ratio = parse_real(*ratio).value();
    r.canonical.set("ratio", *ratio);
  } else {
    s.budget = common_int("budget");
    if (s.budget < s.window + s.sinks)
      throw Error(fmt::format("press {}: budget={}{} is smaller than {}={} + sinks={} (always kept)", def.name,
                              s.budget, budget ? "" : " (the default)", question ? "window_max" : "window", s.window,
                              s.sinks));
    r.canonical.set("budget", std::to_string(s.budget));
  }
  for (const ParamDef& p : common) {
    if (p.key == "budget" || p.key == "ratio") continue;  // set above, first
    if ((p.key == "beta" && alloc != "pyramid") || (p.key == "alpha" && alloc != "ada")) continue;
    if ((p.key == "window_min" || p.key == "window_max") && !question) continue;
    r.canonical.set(p.key, value(p));
  }
  for (const ParamDef& p : def.params) r.canonical.set(p.key, value(p));
  return r;
}

}  // namespace
}  // namespace press_detail

std::vector<std::string> press_names() {
  std::vector<std::string> out;
  for (const press_detail::PressDef* d : press_detail::registry()) out.push_back(d->name);
  return out;
}

std::vector<PressParamInfo> press_params(std::string_view name) {
  const press_detail::PressDef& def = press_detail::find_def(name);
  std::vector<PressParamInfo> out;
  if (!def.make) return out;
  for (const auto& p : press_detail::common_params(def)) out.push_back({p.key, p.default_value, p.doc});
  for (const auto& p : def.params) out.push_back({p.key, p.default_value, p.doc});
  return out;
}

void validate_press_spec(const PressSpec& spec) { press_detail::resolve(spec); }

std::unique_ptr<Press> make_press(const PressSpec& spec) {
  press_detail::Resolved r = press_detail::resolve(spec);
  if (!r.def->make) return press_detail::make_keep_all_press(std::move(r.canonical));
  const press_detail::ParamValues values(r.canonical);
  auto scorer = r.def->make(values);
  auto alloc = press_detail::make_allocator(values);
  return press_detail::make_scorer_press(std::move(r.canonical), r.settings, std::move(scorer), std::move(alloc));
}

}  // namespace snapkv
