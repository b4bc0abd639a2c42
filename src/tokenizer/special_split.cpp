// snapkv tokenizer: splitting control / user-defined token texts out of the input
// (semantics of llama.cpp's llama_vocab::impl::tokenizer_st_partition, see tokenizer_impl.h).
#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer_impl.h"

namespace snapkv::tok {

namespace {

constexpr uint32_t kSpecialAttrs = kTokenAttrControl | kTokenAttrUserDefined | kTokenAttrUnknown;

bool ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

}  // namespace

SpecialSplitter::SpecialSplitter(const Vocab& v) : vocab_(v) {
  for (int32_t id = 0; id < v.size(); ++id) {
    if ((v.attrs[id] & kSpecialAttrs) != 0 && !v.text(id).empty()) order_.push_back(id);
  }
  // Priority: longest text first; equal lengths by id (llama.cpp's std::sort leaves them unordered).
  std::stable_sort(order_.begin(), order_.end(),
                   [&](int32_t a, int32_t b) { return v.text(a).size() > v.text(b).size(); });
  nodes_.emplace_back();
  for (size_t r = 0; r < order_.size(); ++r) {
    const std::string_view t = v.text(order_[r]);
    first_byte_[static_cast<uint8_t>(t[0])] = true;
    int32_t node = 0;
    for (char ch : t) {
      const auto c = static_cast<uint8_t>(ch);
      int32_t child = -1;
      for (const auto& [byte, idx] : nodes_[node].next) {
        if (byte == c) {
          child = idx;
          break;
        }
      }
      if (child < 0) {
        child = static_cast<int32_t>(nodes_.size());
        nodes_[node].next.emplace_back(c, child);
        nodes_.emplace_back();
      }
      node = child;
    }
    if (nodes_[node].rank < 0) nodes_[node].rank = static_cast<int32_t>(r);  // duplicate texts: first rank
  }
}

std::vector<Fragment> SpecialSplitter::split(std::string_view text, bool parse_special) const {
  return split_impl(text, parse_special, nullptr);
}

std::vector<Fragment> SpecialSplitter::split(std::string_view text, std::span<const TextSpan> spans) const {
  return split_impl(text, true, &spans);
}

std::vector<Fragment> SpecialSplitter::split_impl(std::string_view text, bool parse_special,
                                                  const std::span<const TextSpan>* spans) const {
  const size_t n = text.size();
  // With spans: may a control/unknown token at [b, e) be split out?
  auto inside_span = [spans](size_t b, size_t e) {
    const auto it =
        std::upper_bound(spans->begin(), spans->end(), b, [](size_t x, const TextSpan& s) { return x < s.begin; });
    if (it == spans->begin()) return false;
    const TextSpan& s = *(it - 1);
    return b >= s.begin && e <= s.end;
  };
  std::vector<Fragment> frags;
  if (n == 0) return frags;
  frags.push_back({false, -1, 0, n});

  // 1. Which eligible special tokens occur anywhere (by rank)?
  std::vector<uint8_t> present(order_.size(), 0);
  bool any = false;
  for (size_t pos = 0; pos < n; ++pos) {
    if (!first_byte_[static_cast<uint8_t>(text[pos])]) continue;
    int32_t node = 0;
    for (size_t k = pos; k < n; ++k) {
      const auto c = static_cast<uint8_t>(text[k]);
      int32_t child = -1;
      for (const auto& [byte, idx] : nodes_[node].next) {
        if (byte == c) {
          child = idx;
          break;
        }
      }
      if (child < 0) break;
      node = child;
      const int32_t r = nodes_[node].rank;
      if (r >= 0 && !present[r] &&
          (parse_special || (vocab_.attrs[order_[r]] & (kTokenAttrControl | kTokenAttrUnknown)) == 0)) {
        present[r] = 1;
        any = true;
      }
    }
  }
  if (!any) return frags;

  // 2. In priority order, split every raw fragment at the token's leftmost non-overlapping occurrences.
  std::vector<Fragment> next;
  for (size_t r = 0; r < order_.size(); ++r) {
    if (!present[r]) continue;
    const int32_t id = order_[r];
    const std::string_view tt = vocab_.text(id);
    const uint32_t attr = vocab_.attrs[id];
    next.clear();
    for (const Fragment& fr : frags) {
      if (fr.is_token) {
        next.push_back(fr);
        continue;
      }
      const bool restricted = spans != nullptr && (attr & (kTokenAttrControl | kTokenAttrUnknown)) != 0;
      size_t off = fr.off;
      size_t end = fr.off + fr.len;
      size_t from = off;
      while (from < end) {
        const size_t m = text.substr(0, end).find(tt, from);
        if (m == std::string_view::npos) break;
        if (restricted && !inside_span(m, m + tt.size())) {
          from = m + 1;  // data text: not a special token here
          continue;
        }
        size_t left_len = m - off;
        if (attr & kTokenAttrLstrip) {
          while (left_len > 0 && ascii_space(text[off + left_len - 1])) --left_len;
        }
        if (left_len > 0) next.push_back({false, -1, off, left_len});
        next.push_back({true, id, m, tt.size()});
        off = m + tt.size();
        if (attr & kTokenAttrRstrip) {
          while (off < end && ascii_space(text[off])) ++off;
        }
        from = off;
      }
      if (off < end) next.push_back({false, -1, off, end - off});
    }
    frags.swap(next);
  }
  return frags;
}

}  // namespace snapkv::tok
