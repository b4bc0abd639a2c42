// snapkv chat templates: the evaluator that renders a parsed template (jinja2's semantics for the
// subset chat templates use; see docs/chat.md), with limits so that a hostile template fails fast.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "chat/jinja_ast.h"

namespace snapkv::jinja {

/// Bounds on one render. Exceeding one is a TemplateError naming the limit.
struct Limits {
  size_t max_output_bytes = size_t{64} << 20;  ///< rendered text, and any one string or block-set value
  int64_t max_iterations = 1'000'000;          ///< loop iterations of one render, all loops together
  size_t max_items = 1'000'000;                ///< elements of one list built by the template (range(), +, *)
  int max_call_depth = 64;                     ///< nested macro calls
  /// Work of one render: bytes of every string (and kItemWorkBytes per list or dict item) that an
  /// operator, filter, test, method or loop reads or builds, plus the output. Bounds the time of
  /// loops that repeat work on large values. Not the memory a render holds (max_live_bytes).
  size_t max_work_bytes = size_t{1} << 30;
  /// Bytes of strings, lists and dicts the render holds alive at once, its loops' copies of their
  /// sequences included (LiveBytes): bounds the memory of a template that keeps values it built
  /// (70 `set`s of range(1000000) held ~8.5 GB before this limit).
  size_t max_live_bytes = size_t{512} << 20;
};

/// Work charged per list or dict item read or built.
inline constexpr size_t kItemWorkBytes = 16;

struct Scope {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Scope> parent;
};

class Evaluator {
 public:
  explicit Evaluator(const Limits& limits) : limits_(limits) {}
  ~Evaluator();
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  /// Renders `prog` with `globals` as the outermost variables.
  Str render(const Program& prog, const Object& globals);

  /// Calls a callable value with evaluated arguments.
  Value call(const Value& callee, CallArgs& args);

  /// Throws TemplateError at the position being evaluated.
  [[noreturn]] void fail(const std::string& msg) const;
  /// Counts `n` loop iterations against the limit.
  void count_iterations(int64_t n);
  /// Checks the size of a string or list about to be built.
  void check_bytes(size_t n) const;
  void check_items(size_t n) const;
  /// Charges the work of reading or building `v` (see Limits::max_work_bytes).
  void charge(const Value& v);
  void charge_bytes(size_t n);
  const Limits& limits() const { return limits_; }
  /// Remembers a namespace() object, emptied when the render ends (breaks reference cycles).
  void track_namespace(std::shared_ptr<Object> ns);

 private:
  enum class Flow { Normal, Break, Continue };

  Flow exec(const Body& body, Str& out);
  Flow exec_node(const Node& n, Str& out);
  void exec_for(const Node& n, Str& out);
  void exec_macro(const Node& n);
  Value eval(const Expr& e);
  Value eval_binary(const Expr& e);
  Value eval_attr(const Value& obj, const std::string& name);
  Value eval_item(const Value& obj, const Value& key);
  Value eval_slice(const Expr& e);
  Value eval_call(const Expr& e);
  CallArgs eval_args(const Expr& e, size_t first);
  Value lookup(const std::string& name) const;
  void assign(const std::string& name, Value v);
  void emit(Str& out, const Str& s);

  Limits limits_;
  std::shared_ptr<Scope> scope_;
  Pos pos_;
  int64_t iterations_ = 0;
  size_t work_ = 0;
  std::vector<std::shared_ptr<Object>> namespaces_;
  int call_depth_ = 0;
};

// ---- built-ins (jinja_builtins.cpp) ----

/// Applies filter `name` to `target` (the parser checked that it exists).
Value apply_filter(Evaluator& ev, const std::string& name, const Value& target, CallArgs& args);
/// Runs test `name` on `target`.
bool apply_test(Evaluator& ev, const std::string& name, const Value& target, CallArgs& args);
/// `obj.name(args)`: the methods of str, dict and list that chat templates call.
Value call_method(Evaluator& ev, const Value& obj, const std::string& name, CallArgs& args);
/// Adds the global functions: range, namespace, dict, raise_exception, strftime_now.
void add_global_functions(Object& globals);

}  // namespace snapkv::jinja
