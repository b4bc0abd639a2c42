// snapkv presses: span-preserving selection (see span_closing.h).
#include "kv/presses/span_closing.h"

#include <cmath>
#include <limits>
#include <queue>

namespace snapkv::press_detail {
namespace {

struct Entry {
  float score;  // NaN already mapped to -inf
  int32_t pos;
};

/// Orders a max-heap so that its top is the entry to drop first: the lowest score, and of equal
/// scores the later position.
struct DropLater {
  bool operator()(const Entry& a, const Entry& b) const {
    return a.score > b.score || (a.score == b.score && a.pos < b.pos);
  }
};

}  // namespace

std::vector<int32_t> close_spans(const std::vector<int32_t>& picks, const std::vector<float>& scores, int64_t first,
                                 int64_t end, int64_t gap) {
  if (gap <= 0 || picks.empty() || end <= first) return picks;
  const auto score_of = [&](int64_t p) {
    const float s = scores[static_cast<size_t>(p)];
    return std::isnan(s) ? -std::numeric_limits<float>::infinity() : s;
  };
  std::vector<uint8_t> kept(static_cast<size_t>(end - first), 0);
  const auto in_range = [&](int64_t p) { return p >= first && p < end; };
  const auto at = [&](int64_t p) -> uint8_t& { return kept[static_cast<size_t>(p - first)]; };
  // Kept for the purpose of holes: a candidate kept, a sink (0 <= p < first) or the window (p >= end).
  const auto held = [&](int64_t p) { return p >= end || (p >= 0 && (p >= first ? at(p) != 0 : true)); };
  for (int32_t p : picks) at(p) = 1;

  // 1. Fill the holes of 1..gap positions between kept positions (sinks and window included).
  int64_t filled = 0;
  int64_t prev = first > 0 ? first - 1 : -1;  // the last sink, or none
  const auto fill = [&](int64_t a, int64_t b) {
    if (a < 0) return;
    const int64_t holes = b - a - 1;
    if (holes < 1 || holes > gap) return;
    for (int64_t x = a + 1; x < b; ++x) at(x) = 1;
    filled += holes;
  };
  for (int32_t p : picks) {
    fill(prev, p);
    prev = p;
  }
  fill(prev, end);

  // 2. Pay for them: drop the lowest-scored run ends until the count is back to picks.size().
  std::priority_queue<Entry, std::vector<Entry>, DropLater> ends;
  const auto is_end = [&](int64_t p) { return !held(p - 1) || !held(p + 1); };
  const auto offer = [&](int64_t p) {
    if (in_range(p) && at(p) && is_end(p)) ends.push({score_of(p), static_cast<int32_t>(p)});
  };
  for (int64_t p = first; p < end; ++p) offer(p);
  for (int64_t dropped = 0; dropped < filled;) {
    int64_t victim = -1;
    if (!ends.empty()) {
      const Entry e = ends.top();
      ends.pop();
      if (!at(e.pos)) continue;  // dropped already (a position can be offered twice)
      victim = e.pos;
    } else {
      // One run covers every candidate: no end to drop without opening a hole; take the lowest.
      DropLater later;
      Entry worst{0, -1};
      for (int64_t p = first; p < end; ++p) {
        if (!at(p)) continue;
        const Entry e{score_of(p), static_cast<int32_t>(p)};
        if (worst.pos < 0 || later(worst, e)) worst = e;
      }
      victim = worst.pos;
    }
    at(victim) = 0;
    ++dropped;
    offer(victim - 1);
    offer(victim + 1);
  }

  std::vector<int32_t> out;
  out.reserve(picks.size());
  for (int64_t p = first; p < end; ++p)
    if (at(p)) out.push_back(static_cast<int32_t>(p));
  return out;
}

}  // namespace snapkv::press_detail
