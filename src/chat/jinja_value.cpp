// snapkv chat templates: values, data-marked strings, Python's str()/repr()/== (see jinja_value.h).
#include "chat/jinja_value.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <type_traits>

namespace snapkv::jinja {

// ---- Str ------------------------------------------------------------------------------------

Str::Str(std::string s, bool data) : s_(std::move(s)) {
  if (data && !s_.empty()) data_.push_back({0, s_.size()});
}

void Str::add_range(size_t b, size_t e) {
  if (b >= e) return;
  if (!data_.empty() && data_.back().end >= b) {
    data_.back().end = std::max(data_.back().end, e);
    return;
  }
  data_.push_back({b, e});
}

void Str::append(const Str& o) {
  const size_t base = s_.size();
  s_ += o.s_;
  for (const Range& r : o.data_) add_range(base + r.begin, base + r.end);
}

void Str::append_text(std::string_view s) { s_ += s; }

void Str::append_data(std::string_view s) {
  const size_t base = s_.size();
  s_ += s;
  add_range(base, s_.size());
}

Str Str::substr(size_t pos, size_t n) const {
  Str out;
  if (pos >= s_.size()) return out;
  n = std::min(n, s_.size() - pos);
  out.s_ = s_.substr(pos, n);
  const size_t end = pos + n;
  // Only the ranges that overlap [pos, end): a string of many ranges is sliced in O(log ranges).
  auto it = std::upper_bound(data_.begin(), data_.end(), pos, [](size_t p, const Range& r) { return p < r.end; });
  for (; it != data_.end() && it->begin < end; ++it) {
    const Range& r = *it;
    const size_t b = std::max(r.begin, pos);
    const size_t e = std::min(r.end, end);
    if (b < e) out.add_range(b - pos, e - pos);
  }
  return out;
}

Str Str::repeat(size_t times) const {
  Str out;
  out.s_.reserve(s_.size() * times);
  for (size_t k = 0; k < times; ++k) out.s_ += s_;
  if (data_.size() == 1 && data_[0].begin == 0 && data_[0].end == s_.size()) {
    out.mark_all_data();  // all data: one range
  } else if (!data_.empty()) {
    for (size_t k = 0; k < times; ++k) {
      for (const Range& r : data_) out.add_range(k * s_.size() + r.begin, k * s_.size() + r.end);
    }
  }
  return out;
}

void Str::mark_all_data() {
  data_.clear();
  if (!s_.empty()) data_.push_back({0, s_.size()});
}

// ---- Object / CallArgs ----------------------------------------------------------------------

const Value* Object::find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

Value* Object::find(std::string_view key) {
  for (auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Object::set(const std::string& key, Value v) {
  if (Value* old = find(key)) {
    *old = std::move(v);
  } else {
    items.emplace_back(key, std::move(v));
  }
}

const Value* CallArgs::get(size_t index, std::string_view name) const {
  if (index < pos.size()) return &pos[index];
  for (size_t i = 0; i < kw.size(); ++i) {
    if (kw[i].first == name) {
      kw_read.resize(kw.size(), false);
      kw_read[i] = true;
      return &kw[i].second;
    }
  }
  return nullptr;
}

const std::string* CallArgs::unread_keyword() const {
  for (size_t i = 0; i < kw.size(); ++i) {
    if (i >= kw_read.size() || !kw_read[i]) return &kw[i].first;
  }
  return nullptr;
}

// ---- Value ----------------------------------------------------------------------------------

Value Value::undefined(std::string name) {
  Value v;
  // Every copy of the value copies its name: keep it short whatever a caller quoted in it.
  if (const std::string_view b = brief(name, 200); b.size() < name.size()) name = std::string(b) + "...";
  v.undefined_name = std::move(name);
  return v;
}

Value Value::none() {
  Value v;
  v.kind = Kind::None;
  return v;
}

Value Value::boolean(bool x) {
  Value v;
  v.kind = Kind::Bool;
  v.b = x;
  return v;
}

Value Value::integer(int64_t x) {
  Value v;
  v.kind = Kind::Int;
  v.i = x;
  return v;
}

Value Value::real(double x) {
  Value v;
  v.kind = Kind::Float;
  v.f = x;
  return v;
}

// ---- live bytes ----------------------------------------------------------------------------

namespace {

thread_local std::shared_ptr<LiveBytes> tl_live;

/// A value and the bytes it holds against an account, given back when the box goes.
template <class V>
struct CountedBox {
  V value;
  std::shared_ptr<LiveBytes> lb;
  size_t n;
  template <class T>
  CountedBox(T&& x, std::shared_ptr<LiveBytes> l, size_t b) : value(std::forward<T>(x)), lb(std::move(l)), n(b) {}
  ~CountedBox() { lb->sub(n); }
  CountedBox(const CountedBox&) = delete;
  CountedBox& operator=(const CountedBox&) = delete;
};

/// A shared_ptr to a new U counted against the current account (if any): its bytes are given
/// back when the last reference goes, wherever that happens. One allocation, as make_shared.
template <class T, class U>
std::shared_ptr<U> counted(T&& x, size_t bytes) {
  const std::shared_ptr<LiveBytes>& lb = tl_live;
  if (!lb) return std::make_shared<U>(std::forward<T>(x));
  bytes += 64;  // the object, the control block and allocator overhead
  lb->add(bytes);
  std::shared_ptr<CountedBox<std::remove_const_t<U>>> box;
  try {
    box = std::make_shared<CountedBox<std::remove_const_t<U>>>(std::forward<T>(x), lb, bytes);
  } catch (...) {  // nothing was built: no box will give the bytes back
    lb->sub(bytes);
    throw;
  }
  return std::shared_ptr<U>(box, &box->value);
}

}  // namespace

void LiveBytes::add(size_t n) {
  if (live_ + n > limit_) over_(live_ + n, limit_);
  live_ += n;
}

LiveBytesScope::LiveBytesScope(std::shared_ptr<LiveBytes> lb) : prev_(std::move(tl_live)) { tl_live = std::move(lb); }
LiveBytesScope::~LiveBytesScope() { tl_live = std::move(prev_); }

LiveHold::LiveHold(size_t n) {
  if (tl_live) {
    tl_live->add(n);
    lb_ = tl_live;
    n_ = n;
  }
}

LiveHold::~LiveHold() {
  if (lb_) lb_->sub(n_);
}

LiveHold& LiveHold::operator=(LiveHold&& o) noexcept {
  if (this != &o) {
    if (lb_) lb_->sub(n_);
    lb_ = std::move(o.lb_);
    n_ = o.n_;
    o.n_ = 0;
  }
  return *this;
}

std::string_view brief(std::string_view s, size_t max) {
  if (s.size() <= max) return s;
  size_t cut = max;
  for (int back = 0; back < 3 && cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80; ++back) --cut;
  return s.substr(0, cut);
}

void check_string_growth(size_t n) {
  if (tl_live) tl_live->check_string(n);
}

size_t heap_bytes(const Str& s) {
  const size_t text = s.text().capacity() > 15 ? s.text().capacity() + 1 : 0;  // beyond the small-string buffer
  return text + s.data_ranges().capacity() * sizeof(Range);
}

size_t heap_bytes(const Array& a) { return a.capacity() * sizeof(Value); }

Value Value::string(Str x) {
  Value v;
  v.kind = Kind::String;
  const size_t n = heap_bytes(x);
  v.s = counted<Str, const Str>(std::move(x), n);
  return v;
}

Value Value::text(std::string x) { return string(Str(std::move(x), false)); }
Value Value::data(std::string x) { return string(Str(std::move(x), true)); }

Value Value::array(Array x, bool tuple) {
  Value v;
  v.kind = Kind::List;
  for (const Value& e : x) v.depth = std::max(v.depth, e.depth + 1);
  const size_t n = heap_bytes(x);
  v.a = counted<Array, const Array>(std::move(x), n);
  v.is_tuple = tuple;
  return v;
}

Value Value::object(Object x) {
  Value v;
  v.kind = Kind::Dict;
  size_t n = x.items.capacity() * sizeof(x.items[0]);
  for (const auto& kv : x.items) {
    v.depth = std::max(v.depth, kv.second.depth + 1);
    if (kv.first.capacity() > 15) n += kv.first.capacity() + 1;
  }
  v.o = counted<Object, Object>(std::move(x), n);
  return v;
}

Value Value::function(std::string name, std::function<Value(Evaluator&, CallArgs&)> f) {
  Value v;
  v.kind = Kind::Function;
  v.fn = std::make_shared<const Function>(Function{std::move(name), std::move(f)});
  return v;
}

double Value::as_double() const {
  switch (kind) {
    case Kind::Bool:
      return b ? 1.0 : 0.0;
    case Kind::Int:
      return static_cast<double>(i);
    case Kind::Float:
      return f;
    default:
      return 0.0;
  }
}

bool Value::truthy() const {
  switch (kind) {
    case Kind::Undefined:
    case Kind::None:
      return false;
    case Kind::Bool:
      return b;
    case Kind::Int:
      return i != 0;
    case Kind::Float:
      return f != 0.0;
    case Kind::String:
      return !s->text().empty();
    case Kind::List:
      return !a->empty();
    case Kind::Dict:
      return !o->items.empty();
    case Kind::Function:
      return true;
  }
  return false;
}

const char* type_name(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined:
      return "Undefined";
    case Value::Kind::None:
      return "NoneType";
    case Value::Kind::Bool:
      return "bool";
    case Value::Kind::Int:
      return "int";
    case Value::Kind::Float:
      return "float";
    case Value::Kind::String:
      return "str";
    case Value::Kind::List:
      return v.is_tuple ? "tuple" : "list";
    case Value::Kind::Dict:
      return v.is_namespace ? "Namespace" : "dict";
    case Value::Kind::Function:
      return "function";
  }
  return "?";
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // Shortest round-trip digits in scientific form, then laid out as Python's repr does:
  // positional for 1e-4 <= |d| < 1e16, scientific ("1e+16", "1.5e-05") otherwise.
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const size_t e_at = sci.find('e');
  std::string mant = sci.substr(0, e_at);
  const int exp = std::atoi(sci.c_str() + e_at + 1);
  const bool neg = !mant.empty() && mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant) {
    if (c != '.') digits += c;
  }
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out += "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
      out += digits + std::string(static_cast<size_t>(exp) + 1 - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(exp) + 1) + "." + digits.substr(static_cast<size_t>(exp) + 1);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  out += fmt::format("e{}{:02d}", exp < 0 ? '-' : '+', std::abs(exp));
  return out;
}

namespace {

std::string repr_string(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char q = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, q);
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (ch == q || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\r') {
      out += "\\r";
    } else if (ch == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += ch;
    }
  }
  out += q;
  return out;
}

}  // namespace

namespace {

/// Appends repr(v) to `out`: one buffer for the whole nesting, checked against the render's
/// string limit after every item (a nested list built in a buffer per level held each level's
/// partial text at once).
void repr_into(std::string& out, const Value& v) {
  switch (v.kind) {
    case Value::Kind::String:
      out += repr_string(v.str());
      return;
    case Value::Kind::List:
      out += v.is_tuple ? "(" : "[";
      for (size_t k = 0; k < v.a->size(); ++k) {
        if (k > 0) out += ", ";
        repr_into(out, (*v.a)[k]);
        check_string_growth(out.size());
      }
      if (v.is_tuple && v.a->size() == 1) out += ",";
      out += v.is_tuple ? ")" : "]";
      return;
    case Value::Kind::Dict: {
      if (v.is_namespace) {
        out += "<Namespace>";
        return;
      }
      out += "{";
      bool first = true;
      for (const auto& [k, x] : v.o->items) {
        if (!first) out += ", ";
        first = false;
        out += repr_string(k);
        out += ": ";
        repr_into(out, x);
        check_string_growth(out.size());
      }
      out += "}";
      return;
    }
    default:
      out += to_str(v).text();
  }
}

}  // namespace

std::string repr(const Value& v) {
  std::string out;
  repr_into(out, v);
  return out;
}

Str to_str(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined:
      return Str();
    case Value::Kind::None:
      return Str("None");
    case Value::Kind::Bool:
      return Str(v.b ? "True" : "False");
    case Value::Kind::Int:
      return Str(std::to_string(v.i));
    case Value::Kind::Float:
      return Str(float_repr(v.f));
    case Value::Kind::String:
      return *v.s;
    case Value::Kind::List:
    case Value::Kind::Dict:
      return Str(repr(v), true);
    case Value::Kind::Function:
      return Str(fmt::format("<function {}>", v.fn->name));
  }
  return Str();
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind != Value::Kind::Float && b.kind != Value::Kind::Float) {
      const int64_t x = a.kind == Value::Kind::Bool ? (a.b ? 1 : 0) : a.i;
      const int64_t y = b.kind == Value::Kind::Bool ? (b.b ? 1 : 0) : b.i;
      return x == y;
    }
    return a.as_double() == b.as_double();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Kind::Undefined:
    case Value::Kind::None:
      return true;
    case Value::Kind::String:
      return a.str() == b.str();
    case Value::Kind::List: {
      if (a.is_tuple != b.is_tuple) return false;  // Python: (1, 2) != [1, 2]
      if (a.a->size() != b.a->size()) return false;
      for (size_t k = 0; k < a.a->size(); ++k) {
        if (!equals((*a.a)[k], (*b.a)[k])) return false;
      }
      return true;
    }
    case Value::Kind::Dict: {
      if (a.o == b.o) return true;
      if (a.is_namespace || b.is_namespace) return false;
      if (a.o->items.size() != b.o->items.size()) return false;
      for (const auto& [k, x] : a.o->items) {
        const Value* y = b.o->find(k);
        if (y == nullptr || !equals(x, *y)) return false;
      }
      return true;
    }
    case Value::Kind::Function:
      return a.fn == b.fn;
    default:
      return false;
  }
}

namespace {

// Length of the code point starting at s[k], as code_point_offsets() counts it.
size_t code_point_len(std::string_view s, size_t k) {
  const auto c = static_cast<unsigned char>(s[k]);
  size_t len = 1;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
  }
  bool ok = k + len <= s.size();
  for (size_t j = 1; ok && j < len; ++j) ok = (static_cast<unsigned char>(s[k + j]) & 0xC0) == 0x80;
  return ok ? len : 1;
}

}  // namespace

size_t code_point_count(std::string_view s) {
  size_t n = 0;
  for (size_t k = 0; k < s.size(); k += code_point_len(s, k)) ++n;
  return n;
}

std::vector<size_t> code_point_offsets(std::string_view s) {
  std::vector<size_t> out;
  out.reserve(s.size() + 1);
  size_t k = 0;
  while (k < s.size()) {
    out.push_back(k);
    k += code_point_len(s, k);
  }
  out.push_back(s.size());
  return out;
}

}  // namespace snapkv::jinja
