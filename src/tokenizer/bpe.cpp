// snapkv tokenizer: byte-level BPE merging of one pre-tokenized word (behaviour of llama.cpp's
// llm_tokenizer_bpe_session::tokenize; algorithm: Sennrich et al. 2016 / GPT-2 encoder.py bpe()).
#include <algorithm>
#include <queue>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer_impl.h"

namespace snapkv::tok {

namespace {

constexpr char kSep = '\xff';  // never part of valid UTF-8, so "left<sep>right" is unambiguous

struct Symbol {
  int32_t prev;
  int32_t next;
  size_t off;
  size_t n;
};

struct Bigram {
  int32_t left;
  int32_t right;
  int32_t rank;
  size_t left_n;  ///< byte lengths when queued: the pair is stale if either side changed
  size_t right_n;
};

/// Lowest rank first; on equal ranks the leftmost pair.
struct BigramGreater {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

void BpeRanks::add(std::string_view merge, int32_t rank) {
  // As llama.cpp: split at the first space after position 0; a merge without one maps ("", "").
  std::string key;
  const size_t pos = merge.size() > 1 ? merge.find(' ', 1) : std::string_view::npos;
  if (pos != std::string_view::npos) {
    key.reserve(merge.size());
    key.append(merge.substr(0, pos));
    key.push_back(kSep);
    key.append(merge.substr(pos + 1));
  } else {
    key.push_back(kSep);
  }
  ranks_.emplace(std::move(key), rank);  // first occurrence wins
}

int32_t BpeRanks::rank(std::string_view left, std::string_view right) const {
  std::string key;
  key.reserve(left.size() + right.size() + 1);
  key.append(left);
  key.push_back(kSep);
  key.append(right);
  auto it = ranks_.find(key);
  return it == ranks_.end() ? -1 : it->second;
}

void bpe_tokenize_word(const Vocab& v, const BpeRanks& ranks, std::string_view word, bool ignore_merges,
                       std::vector<int32_t>& out) {
  if (word.empty()) return;
  if (ignore_merges) {
    const int32_t id = v.find(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  std::vector<Symbol> sym;
  sym.reserve(word.size());
  for (size_t off = 0; off < word.size();) {
    const size_t len = std::min(utf8_seq_len(static_cast<uint8_t>(word[off])), word.size() - off);
    const auto idx = static_cast<int32_t>(sym.size());
    sym.push_back({idx - 1, off + len == word.size() ? -1 : idx + 1, off, len});
    off += len;
  }

  std::priority_queue<Bigram, std::vector<Bigram>, BigramGreater> queue;
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const int32_t r = ranks.rank(word.substr(sym[left].off, sym[left].n), word.substr(sym[right].off, sym[right].n));
    if (r < 0) return;
    queue.push({left, right, r, sym[left].n, sym[right].n});
  };
  for (size_t i = 1; i < sym.size(); ++i) try_add(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));

  while (!queue.empty()) {
    const Bigram bg = queue.top();
    queue.pop();
    Symbol& l = sym[bg.left];
    Symbol& r = sym[bg.right];
    // Stale if a side was merged away or grew (symbols only grow to the right, from a fixed start,
    // so equal lengths mean equal texts).
    if (l.n == 0 || r.n == 0 || l.n != bg.left_n || r.n != bg.right_n || l.next != bg.right) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = bg.left;
    try_add(l.prev, bg.left);
    try_add(bg.left, l.next);
  }

  for (int32_t i = 0; i != -1; i = sym[i].next) {
    const std::string_view piece = word.substr(sym[i].off, sym[i].n);
    const int32_t id = v.find(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    // As llama.cpp: fall back to the single bytes of the piece that happen to be tokens.
    for (char c : piece) {
      const int32_t b = v.find(std::string_view(&c, 1));
      if (b >= 0) out.push_back(b);
    }
  }
}

}  // namespace snapkv::tok
