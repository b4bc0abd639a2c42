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

struct Candidate {
  int32_t rank;
  int32_t id;
  size_t pos;
  size_t len;
};

}  // namespace

SpecialSplitter::SpecialSplitter(const Vocab& v) : vocab_(v), rank_(static_cast<size_t>(v.size()), -1) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < v.size(); ++id) {
    if ((v.attrs[id] & kSpecialAttrs) != 0 && !v.text(id).empty()) ids.push_back(id);
  }
  // Priority: longest text first; equal lengths by id (llama.cpp's std::sort leaves them unordered).
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return v.text(a).size() > v.text(b).size(); });
  nodes_.emplace_back();
  for (size_t r = 0; r < ids.size(); ++r) {
    const int32_t id = ids[r];
    rank_[id] = static_cast<int32_t>(r);
    const std::string_view t = v.text(id);
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
    if (nodes_[node].token < 0) nodes_[node].token = id;  // duplicate texts: the higher priority one
  }
}

std::vector<Fragment> SpecialSplitter::split(std::string_view text, bool parse_special) const {
  const size_t n = text.size();
  std::vector<Fragment> frags;
  if (n == 0) return frags;

  // 1. Every occurrence of every eligible special token text.
  std::vector<Candidate> cands;
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
      const int32_t id = nodes_[node].token;
      if (id >= 0 && (parse_special || (vocab_.attrs[id] & (kTokenAttrControl | kTokenAttrUnknown)) == 0)) {
        cands.push_back({rank_[id], id, pos, k + 1 - pos});
      }
    }
  }
  if (cands.empty()) {
    frags.push_back({false, -1, 0, n});
    return frags;
  }

  // 2. Token by token in priority order, leftmost first: an occurrence is taken unless it overlaps
  //    text already taken by a token or stripped next to one.
  std::sort(cands.begin(), cands.end(),
            [](const Candidate& a, const Candidate& b) { return a.rank != b.rank ? a.rank < b.rank : a.pos < b.pos; });
  enum : uint8_t { kFree = 0, kToken = 1, kStripped = 2 };
  std::vector<uint8_t> state(n, kFree);
  std::vector<Candidate> taken;
  for (const Candidate& c : cands) {
    bool free = true;
    for (size_t k = c.pos; k < c.pos + c.len; ++k) {
      if (state[k] != kFree) {
        free = false;
        break;
      }
    }
    if (!free) continue;
    std::fill(state.begin() + static_cast<std::ptrdiff_t>(c.pos),
              state.begin() + static_cast<std::ptrdiff_t>(c.pos + c.len), kToken);
    taken.push_back(c);
    const uint32_t attr = vocab_.attrs[c.id];
    if (attr & kTokenAttrLstrip) {
      for (size_t k = c.pos; k > 0 && state[k - 1] == kFree && ascii_space(text[k - 1]); --k) state[k - 1] = kStripped;
    }
    if (attr & kTokenAttrRstrip) {
      for (size_t k = c.pos + c.len; k < n && state[k] == kFree && ascii_space(text[k]); ++k) state[k] = kStripped;
    }
  }

  // 3. Fragments in text order: tokens, and the maximal free runs between them.
  std::sort(taken.begin(), taken.end(), [](const Candidate& a, const Candidate& b) { return a.pos < b.pos; });
  size_t t = 0;
  size_t i = 0;
  while (i < n) {
    if (t < taken.size() && taken[t].pos == i) {
      frags.push_back({true, taken[t].id, i, taken[t].len});
      i += taken[t].len;
      ++t;
    } else if (state[i] == kFree) {
      size_t j = i;
      while (j < n && state[j] == kFree) ++j;
      frags.push_back({false, -1, i, j - i});
      i = j;
    } else {
      ++i;  // stripped whitespace
    }
  }
  return frags;
}

}  // namespace snapkv::tok
