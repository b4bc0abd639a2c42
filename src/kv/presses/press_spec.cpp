// snapkv: the syntax of press specs (PressSpec::parse / to_string / set / get, declared in
// snapkv/press_spec.h). What the names, keys and values mean is checked in factory.cpp.
#include "snapkv/press_spec.h"

#include <fmt/format.h>

#include "kv/presses/params.h"
#include "snapkv/error.h"

namespace snapkv {
namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

bool is_value_char(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u > 0x20 && u != 0x7f && c != ',' && c != '=';
}

/// A character as it reads in a message: 'c', or its code for spaces and control characters.
std::string show(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u > 0x20 && u < 0x7f) return fmt::format("'{}'", c);
  return fmt::format("byte 0x{:02x}", u);
}

}  // namespace

PressSpec PressSpec::parse(std::string_view text) {
  // Positions in messages are 1-based character offsets into `text`.
  const auto fail = [&](size_t at, const std::string& what) {
    throw Error(fmt::format("press spec '{}': {} at position {}", press_detail::shown(text), what, at + 1));
  };
  if (text.empty()) throw Error("press spec is empty (expected a press name such as snapkv or snapkv:budget=1024)");
  PressSpec spec;
  const size_t colon = text.find(':');
  const std::string_view name = text.substr(0, colon);
  if (name.empty()) fail(0, "empty press name");
  for (size_t i = 0; i < name.size(); ++i)
    if (!is_name_char(name[i])) fail(i, fmt::format("unexpected {} in the press name", show(name[i])));
  spec.name = std::string(name);
  spec.params.clear();
  if (colon == std::string_view::npos) return spec;
  size_t pos = colon + 1;
  if (pos == text.size()) fail(colon, "':' must be followed by key=value settings");
  while (true) {
    const size_t comma = text.find(',', pos);
    const size_t end = comma == std::string_view::npos ? text.size() : comma;
    const std::string_view item = text.substr(pos, end - pos);
    if (item.empty()) fail(pos, "empty setting (expected key=value)");
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      fail(pos, fmt::format("setting '{}' has no '=' (expected key=value)", press_detail::shown(item)));
    const std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key.empty()) fail(pos, fmt::format("setting '{}' has an empty key", press_detail::shown(item)));
    for (size_t i = 0; i < key.size(); ++i)
      if (!is_name_char(key[i]))
        fail(pos + i, fmt::format("unexpected {} in the key '{}'", show(key[i]), press_detail::shown(key)));
    if (value.empty()) fail(pos + eq + 1, fmt::format("key '{}' has an empty value", press_detail::shown(key)));
    for (size_t i = 0; i < value.size(); ++i)
      if (!is_value_char(value[i]))
        fail(pos + eq + 1 + i,
             fmt::format("unexpected {} in the value of '{}'", show(value[i]), press_detail::shown(key)));
    if (spec.get(key)) fail(pos, fmt::format("key '{}' given twice", press_detail::shown(key)));
    spec.params.emplace_back(std::string(key), std::string(value));
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return spec;
}

std::string PressSpec::to_string() const {
  std::string out = name;
  for (size_t i = 0; i < params.size(); ++i) out += (i == 0 ? ":" : ",") + params[i].first + "=" + params[i].second;
  return out;
}

void PressSpec::set(std::string key, std::string value) {
  for (auto& [k, v] : params) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  params.emplace_back(std::move(key), std::move(value));
}

std::optional<std::string> PressSpec::get(std::string_view key) const {
  for (const auto& [k, v] : params)
    if (k == key) return v;
  return std::nullopt;
}

}  // namespace snapkv
