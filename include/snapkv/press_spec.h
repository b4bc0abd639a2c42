// snapkv: a press (KV-cache compression policy) and its parameters as text.
// (Placeholder of the engine slice; the presses slice replaces it.)
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace snapkv {

/// "name" or "name:key=value,key=value", e.g. "snapkv:budget=1024,window=32,kernel=7,pool=max".
struct PressSpec {
  std::string name = "none";
  std::vector<std::pair<std::string, std::string>> params;  ///< in the order given

  /// Parses the text form. Throws snapkv::Error naming the offending text.
  static PressSpec parse(std::string_view text);
  /// The text form (parse(to_string()) == *this).
  std::string to_string() const;
  /// Replaces the value of `key`, or appends it.
  void set(std::string key, std::string value);
  /// The value of `key`, if given.
  std::optional<std::string> get(std::string_view key) const;
};

/// The press names, in help order.
std::vector<std::string> press_names();

}  // namespace snapkv
