// snapkv presses: the keys a press owns (ParamDef) and typed access to a validated spec
// (ParamValues). A ParamDef turns a value into its canonical text or rejects it; the factory
// (factory.cpp) runs every key of a spec through its ParamDef, so a press constructor only ever
// sees canonical, in-range values.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "snapkv/press_spec.h"

namespace snapkv::press_detail {

/// Largest window, kernel and sinks accepted (the CLI's cap too): sums of them and of token
/// counts stay far inside int32.
constexpr int64_t kMaxSpan = int64_t{1} << 24;

/// User text (a spec, name, key or value) as it goes into an error message: printable ASCII as
/// is, every other byte as \xNN, cut after `max_bytes` bytes with the total length noted, so a
/// message stays one printable line of bounded length whatever the spec holds.
std::string shown(std::string_view s, size_t max_bytes = 48);

/// Reads the whole of `s` as a decimal integer / a number (std::from_chars: locale-independent,
/// no '+', no spaces); nullopt when malformed or out of the type's range.
std::optional<int64_t> parse_int(std::string_view s);
std::optional<uint64_t> parse_u64(std::string_view s);
std::optional<double> parse_real(std::string_view s);

/// One key of a press.
struct ParamDef {
  std::string key;
  std::string default_value;  ///< canonical text; empty when the key has no default
  std::string doc;            ///< one line for press_params()
  std::string expect;         ///< what a valid value looks like, for error messages
  /// The canonical text of a value, or nullopt when the value is malformed or out of range.
  std::function<std::optional<std::string>(std::string_view)> canonical;
};

/// An integer in [lo, hi] (odd too when `odd`); canonical form: decimal without leading zeros.
ParamDef int_param(std::string key, int64_t def, int64_t lo, int64_t hi, std::string doc, bool odd = false);
/// An unsigned 64-bit integer (decimal).
ParamDef u64_param(std::string key, uint64_t def, std::string doc);
/// A finite number in [lo, hi] (or [lo, hi) when hi_open; hi may be +inf); canonical form: the
/// shortest decimal that reads back to the same double. `def` NaN: no default.
ParamDef real_param(std::string key, double def, double lo, double hi, bool hi_open, std::string doc);
/// One of `choices` (exact spelling).
ParamDef choice_param(std::string key, std::string def, std::vector<std::string> choices, std::string doc);

/// The scorer keys shared by several presses: SnapKV's pooling kernel (odd, default 7) and pooling
/// type (max|avg), and the GQA reduction of query heads to KV heads (mean|max|sum).
ParamDef kernel_param();
ParamDef pool_param();
ParamDef gqa_agg_param();

/// Typed reads of a canonical spec (one produced by the factory: every key present and valid).
/// Reading a key the spec lacks is a programming error: snapkv::Error naming press and key.
class ParamValues {
 public:
  /// Reads `canonical`, which must outlive this object.
  explicit ParamValues(const PressSpec& canonical) : spec_(canonical) {}
  const std::string& press() const { return spec_.name; }
  bool has(std::string_view key) const { return spec_.get(key).has_value(); }
  std::string text(std::string_view key) const;
  int64_t integer(std::string_view key) const;
  uint64_t u64(std::string_view key) const;
  double real(std::string_view key) const;

 private:
  const PressSpec& spec_;
};

}  // namespace snapkv::press_detail
