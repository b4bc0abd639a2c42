// snapkv tokenizer: SentencePiece-style bigram merging (behaviour of llama.cpp's
// llm_tokenizer_spm_session, itself following sentencepiece's bpe_model.cc Encode).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <queue>
#include <string_view>
#include <vector>

#include "snapkv/error.h"
#include "tokenizer/tokenizer_impl.h"

namespace snapkv::tok {

namespace {

struct Symbol {
  int32_t prev;
  int32_t next;
  size_t off;  ///< byte offset into the text
  size_t n;    ///< byte length; 0 once merged into its left neighbour
};

struct Bigram {
  int32_t left;
  int32_t right;
  float score;
  size_t size;  ///< byte length of the merged text when queued (staleness check)
};

/// Highest score first; on equal scores the leftmost pair.
struct BigramLess {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

void spm_tokenize(const Vocab& v, const std::array<int32_t, 256>& byte_tokens, std::string_view text,
                  std::vector<int32_t>& out) {
  std::vector<Symbol> sym;
  sym.reserve(text.size());
  for (size_t off = 0; off < text.size();) {
    const size_t len = std::min(utf8_seq_len(static_cast<uint8_t>(text[off])), text.size() - off);
    const auto idx = static_cast<int32_t>(sym.size());
    sym.push_back({idx - 1, off + len == text.size() ? -1 : idx + 1, off, len});
    off += len;
  }

  std::priority_queue<Bigram, std::vector<Bigram>, BigramLess> queue;
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const std::string_view merged = text.substr(sym[left].off, sym[left].n + sym[right].n);
    const int32_t id = v.find(merged);
    if (id < 0) return;
    queue.push({left, right, v.scores[id], merged.size()});
  };
  for (size_t i = 1; i < sym.size(); ++i) try_add(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));

  while (!queue.empty()) {
    const Bigram bg = queue.top();
    queue.pop();
    Symbol& l = sym[bg.left];
    Symbol& r = sym[bg.right];
    // Stale: one side was merged away, or the pair changed size since it was queued.
    if (l.n == 0 || r.n == 0 || l.n + r.n != bg.size) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = bg.left;
    try_add(l.prev, bg.left);
    try_add(bg.left, l.next);
  }

  for (int32_t i = sym.empty() ? -1 : 0; i != -1; i = sym[i].next) {
    const std::string_view piece = text.substr(sym[i].off, sym[i].n);
    const int32_t id = v.find(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    // Not a token (only single characters can get here): byte fallback.
    for (char c : piece) {
      const int32_t b = byte_tokens[static_cast<uint8_t>(c)];
      if (b < 0) {
        throw Error(fmt::format("tokenizer: vocabulary has neither a byte token <0x{:02X}> nor an unknown token",
                                static_cast<uint8_t>(c)));
      }
      out.push_back(b);
    }
  }
}

}  // namespace snapkv::tok
