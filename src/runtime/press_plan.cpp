// snapkv runtime: PressPlan from a PressSpec (see runtime/press_plan.h).
#include "runtime/press_plan.h"

namespace snapkv {

PressPlan plan_press(const PressSpec& spec, int64_t n_tokens, int64_t question_tokens) {
  PressPlan p;
  std::unique_ptr<Press> press = make_press(spec);  // throws for a bad spec
  p.spec = press->spec().to_string();
  if (spec.name == "none") return p;
  const Press::Plan plan = press->plan(n_tokens, question_tokens);
  p.window = plan.window;
  p.needs_all_queries = press->needs_all_queries();
  p.compress = plan.compress;
  p.capacity = plan.capacity;
  p.note = plan.reason;
  if (p.compress) p.press = std::move(press);
  return p;
}

void validate_press(const PressSpec& spec) { make_press(spec); }

PressPlanSummary plan_press_spec(const PressSpec& spec, int64_t n_tokens, int64_t question_tokens) {
  const PressPlan p = plan_press(spec, n_tokens, question_tokens);
  PressPlanSummary s;
  s.spec = p.spec;
  s.compress = p.compress;
  s.capacity = p.capacity;
  s.note = p.note;
  s.window = p.compress ? p.window : 0;
  return s;
}

}  // namespace snapkv
