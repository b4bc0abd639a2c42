// snapkv chat templates: the evaluator (see jinja_eval.h). Semantics follow jinja2 3.1 with
// Hugging Face's ImmutableSandboxedEnvironment: undefined values print as "", are false and
// iterate as empty, but any attribute, item, arithmetic or call on them is an error; a for loop
// body is a new scope per iteration (a `set` inside it is gone after the iteration: use
// namespace()); `if` bodies share the enclosing scope; macros see the scope they were defined in.
#include "chat/jinja_eval.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

namespace snapkv::jinja {

namespace {

constexpr int kMaxValueDepth = 512;  // JSON data nests at most 128 deep, an expression 200

int64_t to_int(const Value& v) { return v.kind == Value::Kind::Bool ? (v.b ? 1 : 0) : v.i; }
bool is_intlike(const Value& v) { return v.kind == Value::Kind::Int || v.kind == Value::Kind::Bool; }

std::string undefined_message(const Value& v) {
  return v.undefined_name.empty() ? "value is undefined" : v.undefined_name;
}

// Python's a // b and a % b for integers (floor division).
int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

Evaluator::~Evaluator() {
  // A namespace may hold itself (set ns.me = ns) or a loop/macro that refers back to it: clear
  // them all so that no reference cycle outlives the render.
  for (const std::shared_ptr<Object>& ns : namespaces_) ns->items.clear();
}

void Evaluator::track_namespace(std::shared_ptr<Object> ns) { namespaces_.push_back(std::move(ns)); }

void Evaluator::fail(const std::string& msg) const { throw TemplateError{msg, pos_}; }

void Evaluator::count_iterations(int64_t n) {
  iterations_ += n;
  if (iterations_ > limits_.max_iterations) {
    fail(fmt::format("more than {} loop iterations in one render (limit)", limits_.max_iterations));
  }
}

void Evaluator::check_bytes(size_t n) const {
  if (n > limits_.max_output_bytes) {
    fail(fmt::format("a string of {} bytes exceeds the limit of {} bytes", n, limits_.max_output_bytes));
  }
}

void Evaluator::check_items(size_t n) const {
  if (n > limits_.max_items) fail(fmt::format("a list of {} items exceeds the limit of {}", n, limits_.max_items));
}

void Evaluator::charge_bytes(size_t n) {
  work_ += n;
  if (work_ > limits_.max_work_bytes) {
    fail(fmt::format("the template does more than {} bytes of string and list work in one render (limit)",
                     limits_.max_work_bytes));
  }
}

void Evaluator::charge(const Value& v) {
  if (v.is_string()) {
    charge_bytes(v.s->size());
  } else if (v.is_array()) {
    charge_bytes(kItemWorkBytes * v.a->size());
  } else if (v.is_object()) {
    charge_bytes(kItemWorkBytes * v.o->items.size());
  }
}

void Evaluator::emit(Str& out, const Str& s) {
  charge_bytes(s.size());
  check_bytes(out.size() + s.size());
  out.append(s);
}

Str Evaluator::render(const Program& prog, const Object& globals) {
  // Values made during the render hold this account (and give their bytes back) for as long as
  // they live; the scope makes it the thread's current one while the render runs.
  const auto account = std::make_shared<LiveBytes>(
      limits_.max_live_bytes, limits_.max_output_bytes,
      [this](size_t live, size_t limit) {
        fail(fmt::format("the template holds more than {} bytes of strings, lists and dicts at once (limit; {} asked)",
                         limit, live));
      },
      [this](size_t n) { check_bytes(n); });
  const LiveBytesScope counting(account);
  scope_ = std::make_shared<Scope>();
  for (const auto& [k, v] : globals.items) scope_->vars[k] = v;
  auto top = std::make_shared<Scope>();
  top->parent = scope_;
  scope_ = top;
  Str out;
  exec(prog.body, out);
  return out;
}

Value Evaluator::lookup(const std::string& name) const {
  for (const Scope* s = scope_.get(); s != nullptr; s = s->parent.get()) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) return it->second;
  }
  return Value::undefined(fmt::format("'{}' is undefined", name));
}

void Evaluator::assign(const std::string& name, Value v) {
  if (name == "loop") fail("cannot assign to 'loop'");
  // Many statements in a row (set x = [x]) would nest a value without bound.
  if (v.depth > kMaxValueDepth) fail(fmt::format("a value nests deeper than {} lists or dicts", kMaxValueDepth));
  scope_->vars[name] = std::move(v);
}

Evaluator::Flow Evaluator::exec(const Body& body, Str& out) {
  for (const NodePtr& n : body) {
    const Flow f = exec_node(*n, out);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

Evaluator::Flow Evaluator::exec_node(const Node& n, Str& out) {
  pos_ = n.pos;
  switch (n.kind) {
    case NodeKind::Text:
      emit(out, Str(n.text));
      return Flow::Normal;
    case NodeKind::Output: {
      const Value v = eval(*n.expr);
      emit(out, to_str(v));
      return Flow::Normal;
    }
    case NodeKind::If:
      for (size_t k = 0; k < n.conds.size(); ++k) {
        pos_ = n.conds[k]->pos;
        if (eval(*n.conds[k]).truthy()) return exec(n.bodies[k], out);
      }
      return exec(n.else_body, out);
    case NodeKind::For:
      exec_for(n, out);
      return Flow::Normal;
    case NodeKind::Set: {
      Value v = eval(*n.expr);
      pos_ = n.pos;
      if (!n.attr.empty()) {
        const Value ns = lookup(n.text);
        if (!ns.is_object() || !ns.is_namespace) {
          fail(fmt::format("cannot set attribute '{}' of '{}': it is not a namespace()", n.attr, n.text));
        }
        // A loop that wraps the value each time (set ns.l = [ns.l]) would nest it without bound.
        if (v.depth > kMaxValueDepth) fail(fmt::format("a value nests deeper than {} lists or dicts", kMaxValueDepth));
        ns.o->set(n.attr, std::move(v));
      } else if (n.targets.size() == 1) {
        assign(n.targets[0], std::move(v));
      } else {
        if (!v.is_array() || v.a->size() != n.targets.size()) {
          fail(fmt::format("cannot unpack {} into {} variables", type_name(v), n.targets.size()));
        }
        for (size_t k = 0; k < n.targets.size(); ++k) assign(n.targets[k], (*v.a)[k]);
      }
      return Flow::Normal;
    }
    case NodeKind::SetBlock: {
      Str captured;
      exec(n.body, captured);
      Value v = Value::string(std::move(captured));
      for (const ExprPtr& f : n.filters) {
        pos_ = f->pos;
        CallArgs args = eval_args(*f, 1);
        v = apply_filter(*this, f->name, v, args);
      }
      assign(n.text, std::move(v));
      return Flow::Normal;
    }
    case NodeKind::Macro:
      exec_macro(n);
      return Flow::Normal;
    case NodeKind::Break:
      return Flow::Break;
    case NodeKind::Continue:
      return Flow::Continue;
    case NodeKind::Scope:
      return exec(n.body, out);
  }
  return Flow::Normal;
}

void Evaluator::exec_for(const Node& n, Str& out) {
  pos_ = n.expr->pos;
  const Value seq = eval(*n.expr);
  charge(seq);
  std::vector<Value> items;
  switch (seq.kind) {
    case Value::Kind::Undefined:
      break;
    case Value::Kind::List:
      items = *seq.a;
      break;
    case Value::Kind::Dict:
      for (const auto& kv : seq.o->items) items.push_back(Value::data(kv.first));
      break;
    case Value::Kind::String: {
      const std::vector<size_t> cp = code_point_offsets(seq.str());
      check_items(cp.size() - 1);  // one value per character: bound the memory before building them
      for (size_t k = 0; k + 1 < cp.size(); ++k)
        items.push_back(Value::string(seq.s->substr(cp[k], cp[k + 1] - cp[k])));
      break;
    }
    default:
      fail(fmt::format("'{}' object is not iterable", type_name(seq)));
  }
  // The loop's copy of its sequence is alive as long as the loop runs (nested loops, and loops
  // in macros called from a loop's filter, each hold one).
  LiveHold held(heap_bytes(items));
  auto bind = [&](Scope& sc, const Value& item) {
    if (n.targets.size() == 1) {
      sc.vars[n.targets[0]] = item;
      return;
    }
    if (!item.is_array() || item.a->size() != n.targets.size()) {
      fail(fmt::format("cannot unpack {} into {} loop variables", type_name(item), n.targets.size()));
    }
    for (size_t k = 0; k < n.targets.size(); ++k) sc.vars[n.targets[k]] = (*item.a)[k];
  };
  const std::shared_ptr<Scope> outer = scope_;
  if (n.cond) {  // the loop filter runs before the loop: loop.length counts the kept items
    std::vector<Value> kept;
    kept.reserve(items.size());
    LiveHold held_kept(heap_bytes(kept));
    for (const Value& item : items) {
      count_iterations(1);
      scope_ = std::make_shared<Scope>();
      scope_->parent = outer;
      bind(*scope_, item);
      pos_ = n.cond->pos;
      const bool keep = eval(*n.cond).truthy();
      scope_ = outer;
      if (keep) kept.push_back(item);
    }
    items = std::move(kept);
    held = std::move(held_kept);
  }
  if (items.empty()) {
    exec(n.else_body, out);
    return;
  }
  const int64_t len = static_cast<int64_t>(items.size());
  auto index = std::make_shared<int64_t>(0);  // loop.cycle() reads the current iteration
  const Value cycle = Value::function("loop.cycle", [index](Evaluator& ev, CallArgs& a) {
    if (a.pos.empty()) ev.fail("loop.cycle() needs at least one argument");
    return a.pos[static_cast<size_t>(*index) % a.pos.size()];
  });
  for (int64_t k = 0; k < len; ++k) {
    *index = k;
    count_iterations(1);
    Object loop;
    auto& li = loop.items;
    li.reserve(12);
    li.emplace_back("index", Value::integer(k + 1));
    li.emplace_back("index0", Value::integer(k));
    li.emplace_back("revindex", Value::integer(len - k));
    li.emplace_back("revindex0", Value::integer(len - k - 1));
    li.emplace_back("first", Value::boolean(k == 0));
    li.emplace_back("last", Value::boolean(k == len - 1));
    li.emplace_back("length", Value::integer(len));
    li.emplace_back("depth", Value::integer(1));
    li.emplace_back("depth0", Value::integer(0));
    li.emplace_back("previtem",
                    k > 0 ? items[static_cast<size_t>(k - 1)] : Value::undefined("'loop.previtem' is undefined"));
    li.emplace_back("nextitem",
                    k + 1 < len ? items[static_cast<size_t>(k + 1)] : Value::undefined("'loop.nextitem' is undefined"));
    li.emplace_back("cycle", cycle);
    scope_ = std::make_shared<Scope>();
    scope_->parent = outer;
    scope_->vars["loop"] = Value::object(std::move(loop));
    bind(*scope_, items[static_cast<size_t>(k)]);
    Flow f;
    try {
      f = exec(n.body, out);
    } catch (...) {
      scope_ = outer;
      throw;
    }
    scope_ = outer;
    if (f == Flow::Break) break;
  }
}

void Evaluator::exec_macro(const Node& n) {
  const Node* def = &n;
  // Weak: the scope holds the macro, so a strong reference would be a cycle (a leak).
  const std::weak_ptr<Scope> defining = scope_;
  Value fn = Value::function(n.text, [this, def, defining](Evaluator& ev, CallArgs& args) {
    const std::shared_ptr<Scope> home = defining.lock();
    if (!home) ev.fail(fmt::format("macro '{}' called after the block it was defined in ended", def->text));
    if (args.pos.size() > def->params.size()) {
      ev.fail(fmt::format("macro '{}' takes {} arguments, {} given", def->text, def->params.size(), args.pos.size()));
    }
    for (const auto& [k, v] : args.kw) {
      size_t at = def->params.size();
      for (size_t i = 0; i < def->params.size() && at == def->params.size(); ++i)
        if (def->params[i].name == k) at = i;
      if (at == def->params.size()) ev.fail(fmt::format("macro '{}' has no parameter '{}'", def->text, k));
      if (at < args.pos.size()) ev.fail(fmt::format("macro '{}' got multiple values for argument '{}'", def->text, k));
    }
    if (++call_depth_ > limits_.max_call_depth) {
      --call_depth_;
      ev.fail(fmt::format("macro calls nest deeper than {} (limit)", limits_.max_call_depth));
    }
    const std::shared_ptr<Scope> caller = scope_;
    const Pos call_pos = pos_;
    auto sc = std::make_shared<Scope>();
    sc->parent = home;
    scope_ = sc;
    Str out;
    try {
      for (size_t k = 0; k < def->params.size(); ++k) {
        const Param& p = def->params[k];
        const Value* given = args.get(k, p.name);
        if (given != nullptr) {
          sc->vars[p.name] = *given;
        } else if (p.default_value) {
          sc->vars[p.name] = eval(*p.default_value);
        } else {
          sc->vars[p.name] = Value::undefined(fmt::format("'{}' is undefined", p.name));
        }
      }
      exec(def->body, out);
    } catch (...) {
      scope_ = caller;
      --call_depth_;
      throw;
    }
    scope_ = caller;
    pos_ = call_pos;
    --call_depth_;
    return Value::string(std::move(out));
  });
  assign(n.text, std::move(fn));
}

Value Evaluator::call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) fail(undefined_message(callee));
  if (!callee.is_function()) fail(fmt::format("'{}' object is not callable", type_name(callee)));
  Value r = callee.fn->fn(*this, args);
  // A macro refuses names it has no parameter for itself; here: builtins, and a macro's
  // parameter given both by position and by name (Python: "got multiple values").
  if (const std::string* k = args.unread_keyword())
    fail(fmt::format("{}() got an unexpected keyword argument '{}'", callee.fn->name, *k));
  return r;
}

CallArgs Evaluator::eval_args(const Expr& e, size_t first) {
  CallArgs a;
  for (size_t k = first; k < e.args.size(); ++k) a.pos.push_back(eval(*e.args[k]));
  for (const auto& [name, x] : e.kwargs) a.kw.emplace_back(name, eval(*x));
  return a;
}

Value Evaluator::eval_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) fail(undefined_message(obj));
  if (obj.is_object()) {
    if (const Value* v = obj.o->find(name)) return *v;
    return Value::undefined(fmt::format("'{} object' has no attribute '{}'", type_name(obj), brief(name)));
  }
  return Value::undefined(fmt::format("'{} object' has no attribute '{}'", type_name(obj), brief(name)));
}

Value Evaluator::eval_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail(undefined_message(obj));
  if (obj.is_object() && key.is_string()) {
    if (const Value* v = obj.o->find(key.str())) return *v;
    return Value::undefined(fmt::format("'{} object' has no attribute '{}'", type_name(obj), brief(key.str())));
  }
  if ((obj.is_array() || obj.is_string()) && is_intlike(key)) {
    int64_t idx = to_int(key);
    if (obj.is_array()) {
      const auto n = static_cast<int64_t>(obj.a->size());
      if (idx < 0) idx += n;
      if (idx < 0 || idx >= n) return Value::undefined(fmt::format("list index {} out of range", to_int(key)));
      return (*obj.a)[static_cast<size_t>(idx)];
    }
    charge(obj);  // code points are counted over the whole string
    const std::vector<size_t> cp = code_point_offsets(obj.str());
    const auto n = static_cast<int64_t>(cp.size()) - 1;
    if (idx < 0) idx += n;
    if (idx < 0 || idx >= n) return Value::undefined(fmt::format("string index {} out of range", to_int(key)));
    const auto u = static_cast<size_t>(idx);
    return Value::string(obj.s->substr(cp[u], cp[u + 1] - cp[u]));
  }
  if (key.is_string()) return eval_attr(obj, key.str());
  // Only a scalar key is quoted: the repr of a large list would cost its size on every lookup.
  const bool scalar = !key.is_array() && !key.is_object();
  return Value::undefined(
      fmt::format("'{} object' has no item {}", type_name(obj),
                  scalar ? std::string(brief(repr(key))) : std::string("of type ") + type_name(key)));
}

Value Evaluator::eval_slice(const Expr& e) {
  const Value obj = eval(*e.args[0]);
  auto part = [&](size_t k) -> std::optional<int64_t> {
    if (!e.args[k]) return std::nullopt;
    const Value v = eval(*e.args[k]);
    if (v.is_none()) return std::nullopt;
    if (!is_intlike(v)) fail("slice indices must be integers or None");
    return to_int(v);
  };
  const auto start = part(1);
  const auto stop = part(2);
  const auto step_opt = part(3);
  pos_ = e.pos;
  if (obj.is_undefined()) fail(undefined_message(obj));
  const int64_t step = step_opt.value_or(1);
  if (step == 0) fail("slice step cannot be zero");
  std::vector<size_t> cp;
  int64_t n = 0;
  if (obj.is_array()) {
    n = static_cast<int64_t>(obj.a->size());
  } else if (obj.is_string()) {
    charge(obj);  // code points are counted over the whole string
    cp = code_point_offsets(obj.str());
    n = static_cast<int64_t>(cp.size()) - 1;
  } else {
    fail(fmt::format("'{}' object is not subscriptable", type_name(obj)));
  }
  // Python's slice.indices().
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) x += n;
    if (step > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  const int64_t b = clamp(start, step > 0 ? 0 : n - 1);
  const int64_t en = clamp(stop, step > 0 ? n : -1);
  std::vector<int64_t> idx;
  for (int64_t k = b; step > 0 ? k < en : k > en; k += step) idx.push_back(k);
  if (obj.is_array()) {
    Array out;
    out.reserve(idx.size());
    for (int64_t k : idx) out.push_back((*obj.a)[static_cast<size_t>(k)]);
    return Value::array(std::move(out), obj.is_tuple);
  }
  if (step == 1) {
    return Value::string(idx.empty() ? Str()
                                     : obj.s->substr(cp[static_cast<size_t>(b)],
                                                     cp[static_cast<size_t>(en)] - cp[static_cast<size_t>(b)]));
  }
  Str out;
  for (int64_t k : idx) {
    const auto u = static_cast<size_t>(k);
    out.append(obj.s->substr(cp[u], cp[u + 1] - cp[u]));
  }
  return Value::string(std::move(out));
}

Value Evaluator::eval_call(const Expr& e) {
  const Expr& callee = *e.args[0];
  if (callee.kind == ExprKind::Attr) {
    const Value obj = eval(*callee.args[0]);
    if (!(obj.is_object() && obj.o->find(callee.name) != nullptr && obj.o->find(callee.name)->is_function())) {
      CallArgs args = eval_args(e, 1);
      pos_ = callee.pos;
      if (obj.is_undefined()) fail(undefined_message(obj));
      charge(obj);
      return call_method(*this, obj, callee.name, args);
    }
  }
  const Value fn = eval(callee);
  CallArgs args = eval_args(e, 1);
  pos_ = e.pos;
  return call(fn, args);
}

Value Evaluator::eval(const Expr& e) {
  pos_ = e.pos;
  switch (e.kind) {
    case ExprKind::Literal:
      return e.value;
    case ExprKind::Name:
      return lookup(e.name);
    case ExprKind::List:
    case ExprKind::Tuple: {
      Array out;
      for (const ExprPtr& x : e.args) out.push_back(eval(*x));
      return Value::array(std::move(out), e.kind == ExprKind::Tuple);
    }
    case ExprKind::Dict: {
      Object out;
      for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
        const Value key = eval(*e.args[k]);
        if (!key.is_string()) fail("dict keys must be strings in chat templates");
        out.set(key.str(), eval(*e.args[k + 1]));
      }
      return Value::object(std::move(out));
    }
    case ExprKind::Attr: {
      const Value obj = eval(*e.args[0]);
      pos_ = e.pos;
      return eval_attr(obj, e.name);
    }
    case ExprKind::Item: {
      const Value obj = eval(*e.args[0]);
      const Value key = eval(*e.args[1]);
      pos_ = e.pos;
      return eval_item(obj, key);
    }
    case ExprKind::Slice: {
      Value r = eval_slice(e);
      charge(r);
      return r;
    }
    case ExprKind::Call: {
      Value r = eval_call(e);
      charge(r);
      return r;
    }
    case ExprKind::Filter: {
      const Value target = eval(*e.args[0]);
      CallArgs args = eval_args(e, 1);
      pos_ = e.pos;
      charge(target);
      Value r = apply_filter(*this, e.name, target, args);
      charge(r);
      return r;
    }
    case ExprKind::Test: {
      const Value target = eval(*e.args[0]);
      CallArgs args = eval_args(e, 1);
      pos_ = e.pos;
      charge(target);
      return Value::boolean(apply_test(*this, e.name, target, args) != e.negate);
    }
    case ExprKind::Unary: {
      const Value v = eval(*e.args[0]);
      pos_ = e.pos;
      if (e.name == "not") return Value::boolean(!v.truthy());
      if (v.is_undefined()) fail(undefined_message(v));
      if (is_intlike(v)) {
        if (e.name == "-" && to_int(v) == std::numeric_limits<int64_t>::min()) fail("integer overflow in '-'");
        return Value::integer(e.name == "-" ? -to_int(v) : to_int(v));
      }
      if (v.kind == Value::Kind::Float) return Value::real(e.name == "-" ? -v.f : v.f);
      fail(fmt::format("bad operand type for unary {}: '{}'", e.name, type_name(v)));
    }
    case ExprKind::Binary: {
      Value r = eval_binary(e);
      charge(r);
      return r;
    }
    case ExprKind::Cond: {
      if (eval(*e.args[1]).truthy()) return eval(*e.args[0]);
      if (e.args[2]) return eval(*e.args[2]);
      return Value::undefined("the condition of 'x if c' was false and it has no else");
    }
  }
  return Value();
}

Value Evaluator::eval_binary(const Expr& e) {
  const std::string& op = e.name;
  if (op == "and") {
    Value l = eval(*e.args[0]);
    return l.truthy() ? eval(*e.args[1]) : l;
  }
  if (op == "or") {
    Value l = eval(*e.args[0]);
    return l.truthy() ? l : eval(*e.args[1]);
  }
  const Value l = eval(*e.args[0]);
  const Value r = eval(*e.args[1]);
  pos_ = e.pos;
  charge(l);
  charge(r);
  if (op == "~") {
    Str s = to_str(l);
    const Str rs = to_str(r);
    check_bytes(s.size() + rs.size());
    s.append(rs);
    return Value::string(std::move(s));
  }
  if (op == "==") return Value::boolean(equals(l, r));
  if (op == "!=") return Value::boolean(!equals(l, r));
  if (op == "in" || op == "not in") {
    bool found = false;
    if (r.is_string()) {
      if (!l.is_string()) fail(fmt::format("'in <string>' requires a string as left operand, not {}", type_name(l)));
      found = r.str().find(l.str()) != std::string::npos;
    } else if (r.is_array()) {
      for (const Value& x : *r.a) found = found || equals(l, x);
    } else if (r.is_object()) {
      found = l.is_string() && r.o->find(l.str()) != nullptr;
    } else if (r.is_undefined()) {
      fail(undefined_message(r));
    } else {
      fail(fmt::format("argument of type '{}' is not iterable", type_name(r)));
    }
    return Value::boolean(found == (op == "in"));
  }
  if (l.is_undefined()) fail(undefined_message(l));
  if (r.is_undefined()) fail(undefined_message(r));
  if (op == "<" || op == ">" || op == "<=" || op == ">=") {
    int c = 0;
    if (l.is_number() && r.is_number()) {
      const double x = l.as_double();
      const double y = r.as_double();
      if (is_intlike(l) && is_intlike(r)) {
        c = to_int(l) < to_int(r) ? -1 : (to_int(l) > to_int(r) ? 1 : 0);
      } else {
        c = x < y ? -1 : (x > y ? 1 : 0);
      }
    } else if (l.is_string() && r.is_string()) {
      c = l.str().compare(r.str());
      c = c < 0 ? -1 : (c > 0 ? 1 : 0);
    } else {
      fail(fmt::format("'{}' not supported between instances of '{}' and '{}'", op, type_name(l), type_name(r)));
    }
    if (op == "<") return Value::boolean(c < 0);
    if (op == ">") return Value::boolean(c > 0);
    if (op == "<=") return Value::boolean(c <= 0);
    return Value::boolean(c >= 0);
  }
  if (op == "+") {
    if (l.is_string() && r.is_string()) {
      check_bytes(l.s->size() + r.s->size());
      Str s = *l.s;
      s.append(*r.s);
      return Value::string(std::move(s));
    }
    if (l.is_array() && r.is_array()) {
      check_items(l.a->size() + r.a->size());
      Array out = *l.a;
      out.insert(out.end(), r.a->begin(), r.a->end());
      return Value::array(std::move(out), l.is_tuple);
    }
  }
  if (op == "*") {
    const Value* seq = l.is_string() || l.is_array() ? &l : (r.is_string() || r.is_array() ? &r : nullptr);
    const Value* cnt = seq == &l ? &r : &l;
    if (seq != nullptr && is_intlike(*cnt)) {
      const bool empty = seq->is_string() ? seq->s->size() == 0 : seq->a->empty();
      const int64_t times = empty ? 0 : std::max<int64_t>(0, to_int(*cnt));  // "" * 10**18 is no loop
      auto total = [&](size_t n) {  // n * times, saturated (a wrapped product would pass the check)
        size_t prod = 0;
        return __builtin_mul_overflow(n, static_cast<size_t>(times), &prod) ? std::numeric_limits<size_t>::max() : prod;
      };
      if (seq->is_string()) {
        check_bytes(total(seq->s->size()));
        return Value::string(seq->s->repeat(static_cast<size_t>(times)));
      }
      check_items(total(seq->a->size()));
      Array out;
      for (int64_t k = 0; k < times; ++k) out.insert(out.end(), seq->a->begin(), seq->a->end());
      return Value::array(std::move(out));
    }
  }
  if (!l.is_number() || !r.is_number()) {
    if (op == "+" && l.is_string()) {
      fail(fmt::format("can only concatenate str (not \"{}\") to str", type_name(r)));
    }
    fail(fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op, type_name(l), type_name(r)));
  }
  const bool ints = is_intlike(l) && is_intlike(r);
  const double x = l.as_double();
  const double y = r.as_double();
  const int64_t a = ints ? to_int(l) : 0;
  const int64_t b = ints ? to_int(r) : 0;
  int64_t res = 0;
  auto overflow = [&] { fail(fmt::format("integer overflow in '{}'", op)); };
  if (op == "+") {
    if (!ints) return Value::real(x + y);
    if (__builtin_add_overflow(a, b, &res)) overflow();
    return Value::integer(res);
  }
  if (op == "-") {
    if (!ints) return Value::real(x - y);
    if (__builtin_sub_overflow(a, b, &res)) overflow();
    return Value::integer(res);
  }
  if (op == "*") {
    if (!ints) return Value::real(x * y);
    if (__builtin_mul_overflow(a, b, &res)) overflow();
    return Value::integer(res);
  }
  if (op == "/") {
    if (y == 0) fail("division by zero");
    return Value::real(x / y);
  }
  if (op == "//" || op == "%") {
    if (y == 0) fail(op == "//" ? "integer division or modulo by zero" : "modulo by zero");
    if (ints) {
      if (a == std::numeric_limits<int64_t>::min() && b == -1) overflow();
      const int64_t q = floor_div(a, b);
      return Value::integer(op == "//" ? q : a - q * b);
    }
    const double q = std::floor(x / y);
    return Value::real(op == "//" ? q : x - q * y);
  }
  if (op == "**") {
    if (ints && b >= 0) {
      int64_t acc = 1;
      for (int64_t k = 0; k < b; ++k) {
        if (__builtin_mul_overflow(acc, a, &acc)) overflow();
        if (acc == 0 || acc == 1) break;
      }
      if (acc == 1 && a == -1 && b % 2 == 1) acc = -1;
      return Value::integer(acc);
    }
    // Python: ZeroDivisionError, a complex result, OverflowError; this renderer has no complex
    // numbers and writes no inf where Python raises.
    if (x == 0 && y < 0 && std::isfinite(y)) fail("0.0 cannot be raised to a negative power");
    if (x < 0 && std::isfinite(y) && std::floor(y) != y) fail("a negative number to a fractional power is complex");
    const double p = std::pow(x, y);
    if (std::isinf(p) && std::isfinite(x) && std::isfinite(y)) fail("** overflows a float");
    return Value::real(p);
  }
  fail(fmt::format("unsupported operator '{}'", op));
}

}  // namespace snapkv::jinja
