// snapkv chat templates: the filters, tests, methods and global functions (jinja2 3.1's
// built-ins as chat templates use them, plus Hugging Face's tojson, raise_exception and
// strftime_now). Anything not listed here is an error, at parse time for filters and tests.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <optional>

#include "chat/jinja_eval.h"
#include "chat/jinja_text.h"

namespace snapkv::jinja {

namespace {

using FilterFn = Value (*)(Evaluator&, const Value&, CallArgs&);
using TestFn = bool (*)(Evaluator&, const Value&, CallArgs&);

int64_t int_arg(Evaluator& ev, const CallArgs& a, size_t i, const char* name, int64_t dflt) {
  const Value* v = a.get(i, name);
  if (v == nullptr || v->is_none()) return dflt;
  if (v->kind == Value::Kind::Int) return v->i;
  if (v->kind == Value::Kind::Bool) return v->b ? 1 : 0;
  ev.fail(fmt::format("argument '{}' must be an integer, not {}", name, type_name(*v)));
}

bool bool_arg(const CallArgs& a, size_t i, const char* name, bool dflt) {
  const Value* v = a.get(i, name);
  return v == nullptr ? dflt : v->truthy();
}

const std::string* str_arg(Evaluator& ev, const CallArgs& a, size_t i, const char* name) {
  const Value* v = a.get(i, name);
  if (v == nullptr || v->is_none()) return nullptr;
  if (!v->is_string()) ev.fail(fmt::format("argument '{}' must be a string, not {}", name, type_name(*v)));
  // An attribute path is walked (and copied) once per item of the sequence: keep it short.
  constexpr size_t kMaxAttributePath = 1024;
  if (std::string_view(name) == "attribute" && v->str().size() > kMaxAttributePath)
    ev.fail(fmt::format("an attribute path of {} bytes (at most {})", v->str().size(), kMaxAttributePath));
  return &v->str();
}

std::vector<Value> iterate(Evaluator& ev, const Value& v, const char* what) {
  switch (v.kind) {
    case Value::Kind::Undefined:
      return {};
    case Value::Kind::List:
      return *v.a;
    case Value::Kind::Dict: {
      std::vector<Value> keys;
      for (const auto& kv : v.o->items) keys.push_back(Value::data(kv.first));
      return keys;
    }
    case Value::Kind::String: {
      std::vector<Value> out;
      const std::vector<size_t> cp = code_point_offsets(v.str());
      ev.check_items(cp.size() - 1);  // one value per character: bound the memory before building them
      for (size_t k = 0; k + 1 < cp.size(); ++k) out.push_back(Value::string(v.s->substr(cp[k], cp[k + 1] - cp[k])));
      return out;
    }
    default:
      ev.fail(fmt::format("{}: '{}' object is not iterable", what, type_name(v)));
  }
}

// obj's attribute by a dotted path ("a.b", "0"), as jinja2's make_attrgetter.
Value attr_path(const Value& obj, const std::string& path) {
  Value cur = obj;
  size_t from = 0;
  while (true) {
    const size_t dot = path.find('.', from);
    const std::string part = path.substr(from, dot == std::string::npos ? std::string::npos : dot - from);
    if (cur.is_object()) {
      const Value* v = cur.o->find(part);
      cur = v ? *v : Value::undefined(fmt::format("no attribute '{}'", brief(part)));
    } else if (cur.is_array() && !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit)) {
      const size_t i = std::strtoull(part.c_str(), nullptr, 10);
      cur = i < cur.a->size() ? (*cur.a)[i] : Value::undefined("index out of range");
    } else {
      return Value::undefined(fmt::format("no attribute '{}'", brief(part)));
    }
    if (dot == std::string::npos) return cur;
    from = dot + 1;
  }
}

int compare_values(Evaluator& ev, const Value& a, const Value& b, bool case_sensitive) {
  if (a.is_number() && b.is_number()) return a.as_double() < b.as_double() ? -1 : (a.as_double() > b.as_double());
  if (a.is_string() && b.is_string()) {
    if (case_sensitive) return a.str().compare(b.str()) < 0 ? -1 : (a.str() == b.str() ? 0 : 1);
    const std::string x = py_case(*a.s, CaseMap::Lower).text();
    const std::string y = py_case(*b.s, CaseMap::Lower).text();
    return x < y ? -1 : (x == y ? 0 : 1);
  }
  ev.fail(fmt::format("'<' not supported between instances of '{}' and '{}'", type_name(a), type_name(b)));
}

// ---- filters ----

Value f_trim(Evaluator& ev, const Value& v, CallArgs& a) {
  return Value::string(py_strip(to_str(v), StripSide::Both, str_arg(ev, a, 0, "chars")));
}

Value f_length(Evaluator& ev, const Value& v, CallArgs&) {
  switch (v.kind) {
    case Value::Kind::Undefined:
      return Value::integer(0);
    case Value::Kind::String:
      return Value::integer(static_cast<int64_t>(code_point_count(v.str())));
    case Value::Kind::List:
      return Value::integer(static_cast<int64_t>(v.a->size()));
    case Value::Kind::Dict:
      return Value::integer(static_cast<int64_t>(v.o->items.size()));
    default:
      ev.fail(fmt::format("object of type '{}' has no len()", type_name(v)));
  }
}

// transformers' tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
Value f_tojson(Evaluator& ev, const Value& v, CallArgs& a) {
  JsonOptions o;
  if (const Value* ind = a.get(1, "indent"); ind != nullptr && !ind->is_none()) {
    if (ind->kind != Value::Kind::Int || ind->i < 0 || ind->i > 64) ev.fail("tojson: indent must be an integer 0..64");
    o.indent = static_cast<int>(ind->i);
  }
  o.item_sep = o.indent ? "," : ", ";
  if (const Value* sep = a.get(2, "separators"); sep != nullptr && !sep->is_none()) {
    if (!sep->is_array() || sep->a->size() != 2 || !(*sep->a)[0].is_string() || !(*sep->a)[1].is_string()) {
      ev.fail("tojson: separators must be a pair of strings");
    }
    o.item_sep = (*sep->a)[0].str();
    o.key_sep = (*sep->a)[1].str();
  }
  o.sort_keys = bool_arg(a, 3, "sort_keys", false);
  if (const Value* ea = a.get(0, "ensure_ascii"); ea != nullptr && ea->truthy()) {
    ev.fail("tojson: ensure_ascii=True is not supported");
  }
  std::string err;
  std::string out = py_json(v, o, err);
  if (!err.empty()) ev.fail(err);
  ev.check_bytes(out.size());
  return Value::string(Str(std::move(out), true));
}

Value f_upper(Evaluator&, const Value& v, CallArgs&) { return Value::string(py_case(to_str(v), CaseMap::Upper)); }
Value f_lower(Evaluator&, const Value& v, CallArgs&) { return Value::string(py_case(to_str(v), CaseMap::Lower)); }
Value f_title(Evaluator&, const Value& v, CallArgs&) { return Value::string(py_case(to_str(v), CaseMap::TitleWords)); }
Value f_capitalize(Evaluator&, const Value& v, CallArgs&) {
  return Value::string(py_case(to_str(v), CaseMap::Capitalize));
}

Value f_default(Evaluator&, const Value& v, CallArgs& a) {
  const Value* d = a.get(0, "default_value");
  const bool boolean = bool_arg(a, 1, "boolean", false);
  if (v.is_undefined() || (boolean && !v.truthy())) return d ? *d : Value::text("");
  return v;
}

Value f_join(Evaluator& ev, const Value& v, CallArgs& a) {
  const Value* sep = a.get(0, "d");
  const std::string* attr = str_arg(ev, a, 1, "attribute");
  const Str sep_s = sep ? to_str(*sep) : Str();
  Str out;
  bool first = true;
  for (const Value& x : iterate(ev, v, "join")) {
    if (!first) out.append(sep_s);
    first = false;
    out.append(to_str(attr ? attr_path(x, *attr) : x));
    ev.check_bytes(out.size());
  }
  return Value::string(std::move(out));
}

Value f_first(Evaluator& ev, const Value& v, CallArgs&) {
  const std::vector<Value> items = iterate(ev, v, "first");
  return items.empty() ? Value::undefined("no first item, sequence was empty") : items.front();
}

Value f_last(Evaluator& ev, const Value& v, CallArgs&) {
  const std::vector<Value> items = iterate(ev, v, "last");
  return items.empty() ? Value::undefined("no last item, sequence was empty") : items.back();
}

Value f_items(Evaluator& ev, const Value& v, CallArgs&) {
  if (v.is_undefined()) return Value::array({});
  if (!v.is_object()) ev.fail(fmt::format("items: expected a mapping, got {}", type_name(v)));
  Array out;
  for (const auto& [k, x] : v.o->items) out.push_back(Value::array({Value::data(k), x}, true));
  return Value::array(std::move(out));
}

Value f_string(Evaluator&, const Value& v, CallArgs&) { return Value::string(to_str(v)); }

Value f_int(Evaluator& ev, const Value& v, CallArgs& a) {
  const int64_t dflt = int_arg(ev, a, 0, "default", 0);
  const int64_t base = int_arg(ev, a, 1, "base", 10);  // jinja2's int(value, default=0, base=10)
  const auto too_big = [&](const std::string& what) {
    ev.fail(fmt::format("int: {} is beyond the 64-bit integers of this renderer", what));
  };
  if (v.kind == Value::Kind::Int) return v;
  if (v.kind == Value::Kind::Bool) return Value::integer(v.b ? 1 : 0);
  if (v.kind == Value::Kind::Float) {
    if (!std::isfinite(v.f)) return Value::integer(dflt);
    if (!(v.f >= -0x1p63 && v.f < 0x1p63)) too_big(float_repr(v.f));
    return Value::integer(static_cast<int64_t>(v.f));
  }
  if (v.is_string()) {
    const std::string s = py_strip(*v.s, StripSide::Both, nullptr).text();
    // jinja2: int(value, base), and where that fails int(float(value)); a base outside 0,
    // 2..36 is a ValueError there too.
    int64_t x = 0;
    bool overflow = false;
    if ((base == 0 || (base >= 2 && base <= 36)) && py_int_base(s, static_cast<int>(base), x, overflow)) {
      if (overflow) too_big(fmt::format("'{}'", s));
      return Value::integer(x);
    }
    double d = 0;
    if (py_float(s, d) && std::isfinite(d)) {
      if (!(d >= -0x1p63 && d < 0x1p63)) too_big(fmt::format("'{}'", s));
      return Value::integer(static_cast<int64_t>(d));
    }
  }
  return Value::integer(dflt);
}

Value f_float(Evaluator& ev, const Value& v, CallArgs& a) {
  const Value* d = a.get(0, "default");
  const Value dflt = d ? *d : Value::real(0.0);
  if (v.is_number()) return Value::real(v.as_double());
  if (v.is_string()) {
    double x = 0;
    if (py_float(py_strip(*v.s, StripSide::Both, nullptr).text(), x)) return Value::real(x);
  }
  (void)ev;
  return dflt;
}

Value f_replace(Evaluator& ev, const Value& v, CallArgs& a) {
  const std::string* old = str_arg(ev, a, 0, "old");
  const Value* repl = a.get(1, "new");
  if (old == nullptr || repl == nullptr) ev.fail("replace needs two arguments: old, new");
  const int64_t count = int_arg(ev, a, 2, "count", -1);
  Str out = py_replace(to_str(v), *old, to_str(*repl), count);
  ev.check_bytes(out.size());
  return Value::string(std::move(out));
}

Value f_list(Evaluator& ev, const Value& v, CallArgs&) { return Value::array(iterate(ev, v, "list")); }

Value f_reverse(Evaluator& ev, const Value& v, CallArgs&) {
  if (v.is_string()) {
    const std::vector<size_t> cp = code_point_offsets(v.str());
    Str out;
    for (size_t k = cp.size() - 1; k > 0; --k) out.append(v.s->substr(cp[k - 1], cp[k] - cp[k - 1]));
    return Value::string(std::move(out));
  }
  std::vector<Value> items = iterate(ev, v, "reverse");
  std::reverse(items.begin(), items.end());
  return Value::array(std::move(items));
}

Value f_sort(Evaluator& ev, const Value& v, CallArgs& a) {
  const bool rev = bool_arg(a, 0, "reverse", false);
  const bool cs = bool_arg(a, 1, "case_sensitive", false);
  const std::string* attr = str_arg(ev, a, 2, "attribute");
  std::vector<Value> items = iterate(ev, v, "sort");
  auto key = [&](const Value& x) { return attr ? attr_path(x, *attr) : x; };
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    const int c = compare_values(ev, key(x), key(y), cs);
    return rev ? c > 0 : c < 0;
  });
  return Value::array(std::move(items));
}

Value f_unique(Evaluator& ev, const Value& v, CallArgs& a) {
  const bool cs = bool_arg(a, 0, "case_sensitive", false);
  const std::string* attr = str_arg(ev, a, 1, "attribute");
  auto key = [&](const Value& x) {
    Value k = attr ? attr_path(x, *attr) : x;
    return (!cs && k.is_string()) ? Value::string(py_case(*k.s, CaseMap::Lower)) : k;
  };
  std::vector<Value> out;
  std::vector<Value> keys;
  for (const Value& x : iterate(ev, v, "unique")) {
    const Value kx = key(x);
    ev.charge_bytes(kItemWorkBytes * keys.size());  // quadratic in the distinct items: bounded by the work limit
    bool seen = false;
    for (const Value& y : keys) seen = seen || equals(kx, y);
    if (!seen) {
      out.push_back(x);
      keys.push_back(kx);
    }
  }
  return Value::array(std::move(out));
}

Value f_abs(Evaluator& ev, const Value& v, CallArgs&) {
  if (v.kind == Value::Kind::Int) {
    if (v.i == INT64_MIN) ev.fail("integer overflow in abs");
    return Value::integer(v.i < 0 ? -v.i : v.i);
  }
  if (v.kind == Value::Kind::Bool) return Value::integer(v.b ? 1 : 0);
  if (v.kind == Value::Kind::Float) return Value::real(std::fabs(v.f));
  ev.fail(fmt::format("bad operand type for abs(): '{}'", type_name(v)));
}

// round(precision=0, method='common'|'ceil'|'floor'): a float, as jinja2's do_round. "common" is
// Python's round(x, n): the exact binary value correctly rounded to n decimals, ties to even,
// which is what printf("%.*f") does.
Value f_round(Evaluator& ev, const Value& v, CallArgs& a) {
  if (!v.is_number()) ev.fail(fmt::format("round: expected a number, got {}", type_name(v)));
  const int64_t prec = int_arg(ev, a, 0, "precision", 0);
  if (prec < 0 || prec > 30) ev.fail("round: precision must be 0..30");
  const std::string* method = str_arg(ev, a, 1, "method");
  const double x = v.as_double();
  if (method == nullptr || *method == "common") {
    if (v.kind == Value::Kind::Int) return v;  // Python's round(int, n >= 0) is the int
    if (!std::isfinite(x)) return Value::real(x);
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(prec), x);
    return Value::real(std::strtod(buf, nullptr));
  }
  const double scale = std::pow(10.0, static_cast<double>(prec));
  if (*method == "ceil") return Value::real(std::ceil(x * scale) / scale);
  if (*method == "floor") return Value::real(std::floor(x * scale) / scale);
  ev.fail("round: method must be 'common', 'ceil' or 'floor'");
}

// map(attribute='x' [, default=d]) or map('filter', args...)
Value f_map(Evaluator& ev, const Value& v, CallArgs& a) {
  std::vector<Value> out;
  const std::vector<Value> items = iterate(ev, v, "map");
  if (a.pos.empty()) {
    const std::string* attr = str_arg(ev, a, 99, "attribute");
    if (attr == nullptr) ev.fail("map needs a filter name or attribute=");
    const Value* dflt = a.get(99, "default");
    for (const Value& x : items) {
      Value y = attr_path(x, *attr);
      out.push_back(y.is_undefined() && dflt ? *dflt : y);
    }
    return Value::array(std::move(out));
  }
  if (!a.pos[0].is_string() || !has_filter(a.pos[0].str())) ev.fail("map: the first argument must name a filter");
  const std::string name = a.pos[0].str();
  CallArgs rest;
  rest.pos.assign(a.pos.begin() + 1, a.pos.end());
  rest.kw = a.kw;
  a.mark_keywords_read();  // passed on: the filter checks them
  for (const Value& x : items) out.push_back(apply_filter(ev, name, x, rest));
  return Value::array(std::move(out));
}

bool run_test_from_args(Evaluator& ev, const Value& x, const CallArgs& a, size_t first) {
  if (a.pos.size() <= first) return x.truthy();
  if (!a.pos[first].is_string() || !has_test(a.pos[first].str())) ev.fail("the test argument must name a test");
  CallArgs rest;
  rest.pos.assign(a.pos.begin() + static_cast<std::ptrdiff_t>(first) + 1, a.pos.end());
  rest.kw = a.kw;  // jinja2 passes select's keywords on to the test, which checks them
  return apply_test(ev, a.pos[first].str(), x, rest);
}

Value select_impl(Evaluator& ev, const Value& v, CallArgs& a, bool want, bool by_attr) {
  std::vector<Value> out;
  const std::string* attr = nullptr;
  if (by_attr) {
    attr = str_arg(ev, a, 0, "attribute");
    if (attr == nullptr) ev.fail("selectattr/rejectattr need an attribute name");
  }
  // With a test, the keywords are the test's (checked by apply_test, also for an empty sequence
  // here: they are not checked at all then, as in jinja2).
  if (a.pos.size() > (by_attr ? 1u : 0u)) a.mark_keywords_read();
  for (const Value& x : iterate(ev, v, by_attr ? "selectattr" : "select")) {
    const Value subject = by_attr ? attr_path(x, *attr) : x;
    if (run_test_from_args(ev, subject, a, by_attr ? 1 : 0) == want) out.push_back(x);
  }
  return Value::array(std::move(out));
}

Value f_select(Evaluator& ev, const Value& v, CallArgs& a) { return select_impl(ev, v, a, true, false); }
Value f_reject(Evaluator& ev, const Value& v, CallArgs& a) { return select_impl(ev, v, a, false, false); }
Value f_selectattr(Evaluator& ev, const Value& v, CallArgs& a) { return select_impl(ev, v, a, true, true); }
Value f_rejectattr(Evaluator& ev, const Value& v, CallArgs& a) { return select_impl(ev, v, a, false, true); }
Value f_safe(Evaluator&, const Value& v, CallArgs&) { return v; }

Value f_sum(Evaluator& ev, const Value& v, CallArgs& a) {
  const std::string* attr = str_arg(ev, a, 0, "attribute");
  const Value* start = a.get(1, "start");  // jinja2's sum(iterable, attribute=None, start=0)
  if (start != nullptr && !start->is_number())
    ev.fail(fmt::format("sum: start must be a number, not {}", type_name(*start)));
  Value acc = start == nullptr                   ? Value::integer(0)
              : start->kind == Value::Kind::Bool ? Value::integer(start->b ? 1 : 0)
                                                 : *start;
  for (const Value& x : iterate(ev, v, "sum")) {
    const Value y = attr ? attr_path(x, *attr) : x;
    if (!y.is_number()) ev.fail(fmt::format("sum: unsupported operand type '{}'", type_name(y)));
    if (acc.kind == Value::Kind::Int && y.kind != Value::Kind::Float) {
      int64_t r = 0;
      if (__builtin_add_overflow(acc.i, y.kind == Value::Kind::Bool ? (y.b ? 1 : 0) : y.i, &r))
        ev.fail("sum overflows");
      acc = Value::integer(r);
    } else {
      acc = Value::real(acc.as_double() + y.as_double());
    }
  }
  return acc;
}

Value minmax(Evaluator& ev, const Value& v, CallArgs& a, bool want_max) {
  const bool cs = bool_arg(a, 0, "case_sensitive", false);
  const std::string* attr = str_arg(ev, a, 1, "attribute");
  const std::vector<Value> items = iterate(ev, v, want_max ? "max" : "min");
  if (items.empty()) return Value::undefined("no items");
  size_t best = 0;
  for (size_t k = 1; k < items.size(); ++k) {
    const int c = compare_values(ev, attr ? attr_path(items[k], *attr) : items[k],
                                 attr ? attr_path(items[best], *attr) : items[best], cs);
    if (want_max ? c > 0 : c < 0) best = k;
  }
  return items[best];
}

Value f_max(Evaluator& ev, const Value& v, CallArgs& a) { return minmax(ev, v, a, true); }
Value f_min(Evaluator& ev, const Value& v, CallArgs& a) { return minmax(ev, v, a, false); }

const std::map<std::string, FilterFn>& filters() {
  static const std::map<std::string, FilterFn> m = {
      {"trim", f_trim},
      {"length", f_length},
      {"count", f_length},
      {"tojson", f_tojson},
      {"upper", f_upper},
      {"lower", f_lower},
      {"title", f_title},
      {"capitalize", f_capitalize},
      {"default", f_default},
      {"d", f_default},
      {"join", f_join},
      {"first", f_first},
      {"last", f_last},
      {"items", f_items},
      {"string", f_string},
      {"int", f_int},
      {"float", f_float},
      {"replace", f_replace},
      {"list", f_list},
      {"reverse", f_reverse},
      {"sort", f_sort},
      {"unique", f_unique},
      {"abs", f_abs},
      {"round", f_round},
      {"map", f_map},
      {"select", f_select},
      {"reject", f_reject},
      {"selectattr", f_selectattr},
      {"rejectattr", f_rejectattr},
      {"safe", f_safe},
      {"sum", f_sum},
      {"max", f_max},
      {"min", f_min},
  };
  return m;
}

// ---- tests ----

/// The one argument of a test, by position or by jinja2's parameter name where it has one:
/// `other` (sameas), `seq` (in), `num` (divisibleby); eq, ne, lt, le, gt and ge are Python's
/// operator functions, whose parameters are positional only.
const Value& test_arg(Evaluator& ev, const CallArgs& a, const char* test) {
  const std::string_view t = test;
  const char* name = t == "in" ? "seq" : t == "divisibleby" ? "num" : t == "sameas" ? "other" : nullptr;
  const Value* v = name ? a.get(0, name) : (a.pos.empty() ? nullptr : &a.pos[0]);
  if (v == nullptr && !a.kw.empty())
    ev.fail(fmt::format("test '{}' got an unexpected keyword argument '{}'", test, a.kw[0].first));
  if (v == nullptr) ev.fail(fmt::format("test '{}' needs an argument", test));
  return *v;
}

bool t_defined(Evaluator&, const Value& v, CallArgs&) { return !v.is_undefined(); }
bool t_undefined(Evaluator&, const Value& v, CallArgs&) { return v.is_undefined(); }
bool t_none(Evaluator&, const Value& v, CallArgs&) { return v.is_none(); }
bool t_string(Evaluator&, const Value& v, CallArgs&) { return v.is_string(); }
bool t_number(Evaluator&, const Value& v, CallArgs&) { return v.is_number(); }
bool t_integer(Evaluator&, const Value& v, CallArgs&) { return v.kind == Value::Kind::Int; }
bool t_float(Evaluator&, const Value& v, CallArgs&) { return v.kind == Value::Kind::Float; }
bool t_boolean(Evaluator&, const Value& v, CallArgs&) { return v.kind == Value::Kind::Bool; }
bool t_true(Evaluator&, const Value& v, CallArgs&) { return v.kind == Value::Kind::Bool && v.b; }
bool t_false(Evaluator&, const Value& v, CallArgs&) { return v.kind == Value::Kind::Bool && !v.b; }
bool t_mapping(Evaluator&, const Value& v, CallArgs&) { return v.is_object() && !v.is_namespace; }
bool t_iterable(Evaluator&, const Value& v, CallArgs&) {
  return v.is_string() || v.is_array() || (v.is_object() && !v.is_namespace);
}
bool t_sequence(Evaluator& ev, const Value& v, CallArgs& a) { return t_iterable(ev, v, a); }
bool t_callable(Evaluator&, const Value& v, CallArgs&) { return v.is_function(); }
bool t_eq(Evaluator& ev, const Value& v, CallArgs& a) { return equals(v, test_arg(ev, a, "eq")); }
bool t_ne(Evaluator& ev, const Value& v, CallArgs& a) { return !equals(v, test_arg(ev, a, "ne")); }
bool order(Evaluator& ev, const Value& v, const Value& w, const char* op) {
  if (v.is_number() && w.is_number()) {
    const double x = v.as_double();
    const double y = w.as_double();
    return op[0] == '<' ? (op[1] ? x <= y : x < y) : (op[1] ? x >= y : x > y);
  }
  const int c = compare_values(ev, v, w, true);
  return op[0] == '<' ? (op[1] ? c <= 0 : c < 0) : (op[1] ? c >= 0 : c > 0);
}
bool t_lt(Evaluator& ev, const Value& v, CallArgs& a) { return order(ev, v, test_arg(ev, a, "lt"), "<"); }
bool t_le(Evaluator& ev, const Value& v, CallArgs& a) { return order(ev, v, test_arg(ev, a, "le"), "<="); }
bool t_gt(Evaluator& ev, const Value& v, CallArgs& a) { return order(ev, v, test_arg(ev, a, "gt"), ">"); }
bool t_ge(Evaluator& ev, const Value& v, CallArgs& a) { return order(ev, v, test_arg(ev, a, "ge"), ">="); }
bool t_in(Evaluator& ev, const Value& v, CallArgs& a) {
  const Value& c = test_arg(ev, a, "in");
  if (c.is_string()) return v.is_string() && c.str().find(v.str()) != std::string::npos;
  if (c.is_array()) return std::any_of(c.a->begin(), c.a->end(), [&](const Value& x) { return equals(v, x); });
  if (c.is_object()) return v.is_string() && c.o->find(v.str()) != nullptr;
  ev.fail(fmt::format("test 'in': '{}' is not a container", type_name(c)));
}
int64_t need_int(Evaluator& ev, const Value& v, const char* test) {
  if (v.kind == Value::Kind::Int) return v.i;
  if (v.kind == Value::Kind::Bool) return v.b ? 1 : 0;
  ev.fail(fmt::format("test '{}' needs an integer, got {}", test, type_name(v)));
}
// jinja2: value % 2 == 1 (odd) or == 0 (even), so floats too (2.0 is even; inf and nan neither).
double py_mod2(const Value& v) {
  const double x = v.f;
  return x - std::floor(x / 2) * 2;
}
bool t_odd(Evaluator& ev, const Value& v, CallArgs&) {
  if (v.kind == Value::Kind::Float) return py_mod2(v) == 1.0;
  return need_int(ev, v, "odd") % 2 != 0;
}
bool t_even(Evaluator& ev, const Value& v, CallArgs&) {
  if (v.kind == Value::Kind::Float) return py_mod2(v) == 0.0;
  return need_int(ev, v, "even") % 2 == 0;
}
bool t_divisibleby(Evaluator& ev, const Value& v, CallArgs& a) {
  const int64_t d = need_int(ev, test_arg(ev, a, "divisibleby"), "divisibleby");
  if (d == 0) ev.fail("divisibleby 0");
  return need_int(ev, v, "divisibleby") % d == 0;
}
bool t_lower(Evaluator&, const Value& v, CallArgs&) {
  const Str s = to_str(v);
  return py_case(s, CaseMap::Lower).text() == s.text() && py_case(s, CaseMap::Upper).text() != s.text();
}
bool t_upper(Evaluator&, const Value& v, CallArgs&) {
  const Str s = to_str(v);
  return py_case(s, CaseMap::Upper).text() == s.text() && py_case(s, CaseMap::Lower).text() != s.text();
}
bool t_sameas(Evaluator& ev, const Value& v, CallArgs& a) {
  const Value& w = test_arg(ev, a, "sameas");
  if (v.kind != w.kind) return false;
  if (v.is_none() || v.is_undefined()) return true;
  if (v.kind == Value::Kind::Bool) return v.b == w.b;
  if (v.is_object()) return v.o == w.o;
  if (v.is_array()) return v.a == w.a;
  return false;
}

const std::map<std::string, TestFn>& tests() {
  static const std::map<std::string, TestFn> m = {
      {"defined", t_defined},
      {"undefined", t_undefined},
      {"none", t_none},
      {"string", t_string},
      {"number", t_number},
      {"integer", t_integer},
      {"float", t_float},
      {"boolean", t_boolean},
      {"true", t_true},
      {"false", t_false},
      {"mapping", t_mapping},
      {"iterable", t_iterable},
      {"sequence", t_sequence},
      {"callable", t_callable},
      {"eq", t_eq},
      {"equalto", t_eq},
      {"==", t_eq},
      {"ne", t_ne},
      {"!=", t_ne},
      {"lt", t_lt},
      {"lessthan", t_lt},
      {"le", t_le},
      {"gt", t_gt},
      {"greaterthan", t_gt},
      {"ge", t_ge},
      {"in", t_in},
      {"odd", t_odd},
      {"even", t_even},
      {"divisibleby", t_divisibleby},
      {"lower", t_lower},
      {"upper", t_upper},
      {"sameas", t_sameas},
  };
  return m;
}

// ---- methods ----

// The bytes of s[start:end] for a str method's optional start / end arguments at positions i,
// i + 1 (py_slice_bytes; None or absent = the whole string).
SliceBytes cp_range(Evaluator& ev, const std::string& t, const CallArgs& a, size_t i, const std::string& method) {
  auto index = [&](const Value* v) -> std::optional<int64_t> {
    if (v == nullptr || v->is_none()) return std::nullopt;
    if (v->kind != Value::Kind::Int && v->kind != Value::Kind::Bool)
      ev.fail(fmt::format("{}(): slice indices must be integers or None, not {}", method, type_name(*v)));
    return v->kind == Value::Kind::Bool ? (v->b ? 1 : 0) : v->i;
  };
  return py_slice_bytes(t, index(a.get(i, "start")), index(a.get(i + 1, "end")));
}

Value str_method(Evaluator& ev, const Value& obj, const std::string& name, CallArgs& a) {
  const Str& s = *obj.s;
  if (name == "startswith" || name == "endswith") {
    const Value* p = a.get(0, "prefix");
    if (p == nullptr) ev.fail(fmt::format("{}() needs an argument", name));
    if (p->is_array() && !p->is_tuple) ev.fail(fmt::format("{}() takes a str or a tuple of str, not a list", name));
    std::vector<Value> options = p->is_array() ? *p->a : std::vector<Value>{*p};
    const SliceBytes r = cp_range(ev, s.text(), a, 1, name);
    const std::string_view t = std::string_view(s.text()).substr(r.begin, r.end - r.begin);
    for (const Value& o : options) {
      if (!o.is_string()) ev.fail(fmt::format("{}() arguments must be strings", name));
      const std::string& x = o.str();
      if (!r.past_end && (name == "startswith" ? t.starts_with(x) : t.ends_with(x))) return Value::boolean(true);
    }
    return Value::boolean(false);
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const StripSide side = name == "strip" ? StripSide::Both : (name == "lstrip" ? StripSide::Left : StripSide::Right);
    return Value::string(py_strip(s, side, str_arg(ev, a, 0, "chars")));
  }
  if (name == "split") {
    const std::string* sep = str_arg(ev, a, 0, "sep");
    if (sep != nullptr && sep->empty()) ev.fail("split(): empty separator");
    std::vector<Str> parts = py_split(s, sep, int_arg(ev, a, 1, "maxsplit", -1));
    Array out;
    for (Str& p : parts) out.push_back(Value::string(std::move(p)));
    ev.check_items(out.size());
    return Value::array(std::move(out));
  }
  if (name == "upper") return Value::string(py_case(s, CaseMap::Upper));
  if (name == "lower") return Value::string(py_case(s, CaseMap::Lower));
  if (name == "title") return Value::string(py_case(s, CaseMap::Title));
  if (name == "capitalize") return Value::string(py_case(s, CaseMap::Capitalize));
  if (name == "replace") return f_replace(ev, obj, a);
  if (name == "find" || name == "count" || name == "index") {
    const std::string* sub = str_arg(ev, a, 0, "sub");
    if (sub == nullptr) ev.fail(fmt::format("{}() needs a string argument", name));
    const std::string& t = s.text();
    const SliceBytes r = cp_range(ev, t, a, 1, name);
    const auto found = [&](size_t at) { return at != std::string::npos && at + sub->size() <= r.end; };
    if (name == "count") {
      if (r.past_end) return Value::integer(0);
      if (sub->empty())
        return Value::integer(static_cast<int64_t>(code_point_offsets(t.substr(r.begin, r.end - r.begin)).size()));
      int64_t n = 0;
      for (size_t at = t.find(*sub, r.begin); found(at); at = t.find(*sub, at + sub->size())) ++n;
      return Value::integer(n);
    }
    const size_t at = r.past_end ? std::string::npos : t.find(*sub, r.begin);
    if (!found(at)) {
      if (name == "index") ev.fail("substring not found");
      return Value::integer(-1);
    }
    return Value::integer(static_cast<int64_t>(code_point_offsets(t.substr(0, at)).size()) - 1);
  }
  if (name == "join") {
    const Value* items = a.get(0, "iterable");
    if (items == nullptr) ev.fail("join() needs an argument");
    Str out;
    bool first = true;
    for (const Value& x : iterate(ev, *items, "join")) {
      if (!x.is_string()) ev.fail(fmt::format("join(): expected str, found {}", type_name(x)));
      if (!first) out.append(s);
      first = false;
      out.append(*x.s);
      ev.check_bytes(out.size());
    }
    return Value::string(std::move(out));
  }
  if (name == "isdigit" || name == "isspace" || name == "isalpha" || name == "isalnum") {
    const std::string& t = s.text();
    if (t.empty()) return Value::boolean(false);
    for (unsigned char c : t) {
      const bool ok = name == "isdigit"   ? std::isdigit(c) != 0
                      : name == "isspace" ? std::isspace(c) != 0
                      : name == "isalpha" ? std::isalpha(c) != 0
                                          : std::isalnum(c) != 0;
      if (!ok) return Value::boolean(false);
    }
    return Value::boolean(true);
  }
  ev.fail(fmt::format("str has no supported method '{}'", name));
}

Value dict_method(Evaluator& ev, const Value& obj, const std::string& name, CallArgs& a) {
  if (name == "items") return f_items(ev, obj, a);
  if (name == "keys" || name == "values") {
    Array out;
    for (const auto& [k, v] : obj.o->items) out.push_back(name == "keys" ? Value::data(k) : v);
    return Value::array(std::move(out));
  }
  if (name == "get") {
    const Value* key = a.get(0, "key");
    if (key == nullptr) ev.fail("get() needs a key");
    const Value* dflt = a.get(1, "default");
    if (key->is_string()) {
      if (const Value* v = obj.o->find(key->str())) return *v;
    }
    return dflt ? *dflt : Value::none();
  }
  for (const char* mut : {"update", "pop", "popitem", "setdefault", "clear"}) {
    if (name == mut) ev.fail(fmt::format("dict.{}() would modify a value; templates are sandboxed as in HF", name));
  }
  ev.fail(fmt::format("dict has no supported method '{}'", name));
}

}  // namespace

bool has_filter(const std::string& name) { return filters().count(name) > 0; }
bool has_test(const std::string& name) { return tests().count(name) > 0; }

static void check_keywords_read(Evaluator& ev, const CallArgs& args, std::string_view what) {
  if (const std::string* k = args.unread_keyword())
    ev.fail(fmt::format("{} got an unexpected keyword argument '{}'", what, *k));
}

Value apply_filter(Evaluator& ev, const std::string& name, const Value& target, CallArgs& args) {
  const auto it = filters().find(name);
  if (it == filters().end()) ev.fail(fmt::format("unknown filter '{}'", name));
  Value r = it->second(ev, target, args);
  check_keywords_read(ev, args, fmt::format("filter '{}'", name));
  return r;
}

bool apply_test(Evaluator& ev, const std::string& name, const Value& target, CallArgs& args) {
  const auto it = tests().find(name);
  if (it == tests().end()) ev.fail(fmt::format("unknown test '{}'", name));
  const bool r = it->second(ev, target, args);
  check_keywords_read(ev, args, fmt::format("test '{}'", name));
  return r;
}

Value call_method(Evaluator& ev, const Value& obj, const std::string& name, CallArgs& args) {
  if (obj.is_string()) {
    Value r = str_method(ev, obj, name, args);
    check_keywords_read(ev, args, fmt::format("str.{}()", name));
    return r;
  }
  if (obj.is_object() && !obj.is_namespace) {
    Value r = dict_method(ev, obj, name, args);
    check_keywords_read(ev, args, fmt::format("dict.{}()", name));
    return r;
  }
  if (obj.is_array()) {
    for (const char* mut : {"append", "extend", "insert", "pop", "remove", "sort", "reverse", "clear"}) {
      if (name == mut) {
        ev.fail(fmt::format("list.{}() would modify a value; templates are sandboxed as in HF (use + or namespace())",
                            name));
      }
    }
  }
  ev.fail(fmt::format("'{}' object has no supported method '{}'", type_name(obj), name));
}

void add_global_functions(Object& g) {
  g.set("range", Value::function("range", [](Evaluator& ev, CallArgs& a) {
          if (a.pos.empty() || a.pos.size() > 3 || !a.kw.empty()) ev.fail("range() takes 1 to 3 integer arguments");
          int64_t v[3] = {0, 0, 1};
          for (size_t k = 0; k < a.pos.size(); ++k) {
            if (a.pos[k].kind != Value::Kind::Int && a.pos[k].kind != Value::Kind::Bool) {
              ev.fail(fmt::format("range() arguments must be integers, not {}", type_name(a.pos[k])));
            }
          }
          if (a.pos.size() == 1) {
            v[1] = a.pos[0].i;
          } else {
            v[0] = a.pos[0].i;
            v[1] = a.pos[1].i;
            if (a.pos.size() == 3) v[2] = a.pos[2].i;
          }
          if (v[2] == 0) ev.fail("range() step must not be zero");
          const long double n = std::ceil((static_cast<long double>(v[1]) - v[0]) / v[2]);
          const size_t count = n > 0 ? static_cast<size_t>(std::min<long double>(n, 1e18L)) : 0;
          ev.check_items(count);
          Array out;
          out.reserve(count);
          for (size_t k = 0; k < count; ++k) out.push_back(Value::integer(v[0] + static_cast<int64_t>(k) * v[2]));
          return Value::array(std::move(out));
        }));
  auto make_dict = [](Evaluator& ev, CallArgs& a, bool ns) {
    Object o;
    if (!a.pos.empty()) {
      if (a.pos.size() > 1 || !a.pos[0].is_object()) ev.fail("namespace()/dict() take one mapping and keywords");
      o = *a.pos[0].o;
    }
    for (auto& [k, v] : a.kw) o.set(k, v);
    a.mark_keywords_read();
    Value r = Value::object(std::move(o));
    r.is_namespace = ns;
    if (ns) ev.track_namespace(r.o);
    return r;
  };
  g.set("namespace",
        Value::function("namespace", [make_dict](Evaluator& ev, CallArgs& a) { return make_dict(ev, a, true); }));
  g.set("dict", Value::function("dict", [make_dict](Evaluator& ev, CallArgs& a) { return make_dict(ev, a, false); }));
  g.set("raise_exception", Value::function("raise_exception", [](Evaluator& ev, CallArgs& a) -> Value {
          const Value* m = a.get(0, "message");  // transformers: raise_exception(message)
          const std::string msg = m ? to_str(*m).text() : std::string();
          ev.fail(fmt::format("the template raised an error: {}", msg));
        }));
  g.set("strftime_now", Value::function("strftime_now", [](Evaluator& ev, CallArgs& a) {
          const Value* f = a.get(0, "format");  // transformers: strftime_now(format)
          if (a.pos.size() > 1 || f == nullptr || !f->is_string()) ev.fail("strftime_now() takes one format string");
          const std::time_t now = std::time(nullptr);
          std::tm tm{};
          localtime_r(&now, &tm);
          char buf[512];
          const size_t n = std::strftime(buf, sizeof buf, f->str().c_str(), &tm);
          // A format that came from data gives data: its text is copied into the result.
          return Value::string(Str(std::string(buf, n), f->s->has_data()));
        }));
}

}  // namespace snapkv::jinja
