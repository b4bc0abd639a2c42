#include "eval/score.h"

#include <algorithm>

namespace snapkv::eval {

namespace {

std::string lower_ascii(std::string_view s) {
  std::string r(s);
  for (char& c : r)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return r;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

std::string_view strip(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string postprocess_pred(std::string_view pred) {
  std::string s(strip(pred));
  for (char& c : s)
    if (static_cast<unsigned char>(c) <= 0x1f) c = '\n';
  return std::string(strip(s));
}

double string_match_all(std::string_view pred, const std::vector<std::string>& refs) {
  if (refs.empty()) return 0.0;
  const std::string p = lower_ascii(pred);
  size_t hit = 0;
  for (const auto& r : refs) hit += p.find(lower_ascii(r)) != std::string::npos ? 1 : 0;
  return static_cast<double>(hit) / static_cast<double>(refs.size());
}

double string_match_part(std::string_view pred, const std::vector<std::string>& refs) {
  const std::string p = lower_ascii(pred);
  for (const auto& r : refs)
    if (p.find(lower_ascii(r)) != std::string::npos) return 1.0;
  return 0.0;
}

size_t count_occurrences(std::string_view text, std::string_view needle) {
  if (needle.empty()) return 0;
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string_view::npos; at = text.find(needle, at + needle.size())) ++n;
  return n;
}

}  // namespace snapkv::eval
