// snapkv chat templates: the values a Jinja template computes with (Python's types as jinja2 sees
// them: None, bool, int, float, str, list, dict, callables), and strings that remember which of
// their bytes came from data (messages, tools) rather than from the template's own text.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace snapkv::jinja {

/// Byte range [begin, end).
struct Range {
  size_t begin = 0;
  size_t end = 0;
};

/// A string plus the byte ranges of it that are data (came from the caller's messages or tools).
/// The rest was written by the template itself. Special-token texts are recognised only outside
/// the data ranges, so user content cannot inject them. Ranges are sorted, disjoint and never
/// adjacent (merged).
class Str {
 public:
  Str() = default;
  explicit Str(std::string s, bool data = false);

  const std::string& text() const { return s_; }
  const std::vector<Range>& data_ranges() const { return data_; }
  bool has_data() const { return !data_.empty(); }
  size_t size() const { return s_.size(); }

  void append(const Str& o);
  void append_text(std::string_view s);  ///< template text
  void append_data(std::string_view s);  ///< data
  /// Bytes [pos, pos + n) with their ranges.
  Str substr(size_t pos, size_t n) const;
  /// Marks every byte as data.
  void mark_all_data();
  /// This string `times` times over (ranges repeated).
  Str repeat(size_t times) const;

 private:
  void add_range(size_t b, size_t e);
  std::string s_;
  std::vector<Range> data_;
};

struct Value;
using Array = std::vector<Value>;

/// The bytes of values a render holds alive: the heap buffers of every string, list and dict made
/// while it is the thread's current account (LiveBytesScope), counted when the value is made and
/// given back when its last reference goes, against a limit. Unlike the work of a render
/// (Limits::max_work_bytes), a list rebuilt a thousand times (set ns.l = ns.l + [x]) costs only
/// what is alive at once.
class LiveBytes {
 public:
  /// `over(live, limit)` is called (and must throw) when an addition would pass `limit` bytes;
  /// `string_over(n)` when a string being built reaches `max_string` bytes (check_string_growth).
  /// Both are called only while this account is current, i.e. during its render.
  LiveBytes(size_t limit, size_t max_string, std::function<void(size_t, size_t)> over,
            std::function<void(size_t)> string_over)
      : limit_(limit), max_string_(max_string), over_(std::move(over)), string_over_(std::move(string_over)) {}
  void add(size_t n);
  void sub(size_t n) { live_ -= n; }
  size_t live() const { return live_; }
  void check_string(size_t n) const {
    if (n > max_string_) string_over_(n);
  }

 private:
  size_t limit_;
  size_t max_string_;
  std::function<void(size_t, size_t)> over_;
  std::function<void(size_t)> string_over_;
  std::atomic<size_t> live_{0};  ///< a value may die on another thread than the render's
};

/// Bytes held while it lives (a loop's copy of its sequence), counted against the current
/// account if there is one.
class LiveHold {
 public:
  LiveHold() = default;
  explicit LiveHold(size_t n);
  ~LiveHold();
  LiveHold(const LiveHold&) = delete;
  LiveHold& operator=(const LiveHold&) = delete;
  LiveHold(LiveHold&& o) noexcept : lb_(std::move(o.lb_)), n_(o.n_) { o.n_ = 0; }
  LiveHold& operator=(LiveHold&& o) noexcept;

 private:
  std::shared_ptr<LiveBytes> lb_;
  size_t n_ = 0;
};

/// Fails the current render (its string limit) when a string being built has reached `n` bytes;
/// nothing outside a render. For builders that grow a string piece by piece (repr, tojson).
void check_string_growth(size_t n);

/// Makes `lb` the current account of this thread for its lifetime (renders run on one thread).
class LiveBytesScope {
 public:
  explicit LiveBytesScope(std::shared_ptr<LiveBytes> lb);
  ~LiveBytesScope();
  LiveBytesScope(const LiveBytesScope&) = delete;
  LiveBytesScope& operator=(const LiveBytesScope&) = delete;

 private:
  std::shared_ptr<LiveBytes> prev_;
};

/// At most `max` bytes of `s`, cut at a UTF-8 character boundary: a value quoted in a message.
std::string_view brief(std::string_view s, size_t max = 120);

/// Heap bytes of a Str / Array (their buffers, not the values an Array's items point to).
size_t heap_bytes(const Str& s);
size_t heap_bytes(const Array& a);

/// A dict in insertion order (Python 3.7+ dicts; tojson keeps the order).
struct Object {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(std::string_view key) const;
  Value* find(std::string_view key);
  void set(const std::string& key, Value v);
};

struct CallArgs;
class Evaluator;

/// A callable: a built-in function (range, namespace, raise_exception, ...), a bound method or a
/// macro.
struct Function {
  std::string name;
  std::function<Value(Evaluator&, CallArgs&)> fn;
};

struct Value {
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Function };

  Kind kind = Kind::Undefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::shared_ptr<const Str> s;
  std::shared_ptr<const Array> a;
  std::shared_ptr<Object> o;  ///< mutable only for namespace() objects
  std::shared_ptr<const Function> fn;
  bool is_namespace = false;
  bool is_tuple = false;
  /// Nesting of lists and dicts, as built (0 for scalars; a namespace counts as it was created).
  /// Bounded where a value can outlive a loop iteration (set ns.attr): printing, comparing and
  /// destroying a value recurse on it.
  int depth = 0;
  std::string undefined_name;  ///< for "'x' is undefined" messages

  static Value undefined(std::string name = {});
  static Value none();
  static Value boolean(bool v);
  static Value integer(int64_t v);
  static Value real(double v);
  static Value string(Str v);
  static Value text(std::string v);  ///< template text
  static Value data(std::string v);  ///< a string from the caller's data
  static Value array(Array v, bool tuple = false);
  static Value object(Object v);
  static Value function(std::string name, std::function<Value(Evaluator&, CallArgs&)> fn);

  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_none() const { return kind == Kind::None; }
  bool is_string() const { return kind == Kind::String; }
  bool is_number() const { return kind == Kind::Int || kind == Kind::Float || kind == Kind::Bool; }
  bool is_array() const { return kind == Kind::List; }
  bool is_object() const { return kind == Kind::Dict; }
  bool is_function() const { return kind == Kind::Function; }
  const std::string& str() const { return s->text(); }  ///< only for strings
  double as_double() const;                             ///< numbers only
  bool truthy() const;
};

/// Positional and keyword arguments of a call.
struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  /// The argument `name` at position `index` or as keyword; nullptr if not given. A keyword
  /// argument returned here counts as read.
  const Value* get(size_t index, std::string_view name) const;
  /// Marks every keyword argument read (a callee that takes any keywords, or passes them on).
  void mark_keywords_read() const { kw_read.assign(kw.size(), true); }
  /// The first keyword argument the callee never asked for (jinja2 raises TypeError for one);
  /// nullptr if there is none.
  const std::string* unread_keyword() const;

 private:
  mutable std::vector<bool> kw_read;  ///< per kw entry; empty = none read yet
};

/// Python's type name of the value ("str", "int", "list", "dict", "NoneType", ...).
const char* type_name(const Value& v);

/// Python's str(v) as jinja2 prints it: None -> "None", True -> "True", floats as repr(),
/// lists and dicts as repr(); undefined -> "". Strings keep their data ranges; every other
/// result derived from a container is marked data as a whole.
Str to_str(const Value& v);
/// Python's repr(v) (strings quoted).
std::string repr(const Value& v);
/// Python's repr of a float (shortest round-trip digits: 1.0, 0.1, 1e+16, inf, nan).
std::string float_repr(double d);

/// Python's ==.
bool equals(const Value& a, const Value& b);

/// Code points of UTF-8 text as byte offsets: result[k] is where code point k starts;
/// result.back() == s.size(). Invalid bytes count as one code point each.
std::vector<size_t> code_point_offsets(std::string_view s);
/// Number of code points, counted as code_point_offsets() does.
size_t code_point_count(std::string_view s);

}  // namespace snapkv::jinja
