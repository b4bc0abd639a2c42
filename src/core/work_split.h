// snapkv: items of one parallel loop shared out among a team's threads, each thread first
// walking its own contiguous range front to back, then taking items from the back of the ranges
// of threads that are behind ("work stealing"). Used by the matmul row loop (quant/tiling.h), the
// token-lane prefill matmuls (quant/lane_driver.h) and the split-K decode attention's tasks
// (attention/decode.cpp).
//
// Why: with a static split every parallel loop of a decode step ends at the speed of its slowest
// thread, and threads do not run at one speed: a vCPU whose host core is shared, a core that
// another process also uses, the efficiency cores of a hybrid CPU. The owner still reads one
// sequential stream (weight rows, KV rows: what the hardware prefetchers follow best); a thread
// that is done helps a slower one from the far end of its range. The callers' items compute the
// same bits whichever thread runs them, so their outputs are bit for bit those of a static split.
#pragma once

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace snapkv {

/// The items [0, n_items) of one loop in `parts` contiguous ranges, range p = [n p / parts,
/// n (p + 1) / parts). Claims are atomic (one compare-and-swap each on the range's cache line):
/// every item goes to exactly one claim, whichever threads call next() and however many.
/// reset() must not run concurrently with next(); share the object among the team after reset()
/// (e.g. declare it before the parallel region). Construction writes nothing (a WorkSplit on the
/// stack costs no stores until reset), and next() before any reset() finds no item.
class WorkSplit {
 public:
  /// Most ranges (2 KiB of cache lines, so a few splits fit on the stack); in a team with more
  /// threads the extra threads have no range of their own and only take items from the others'
  /// backs (correct, but they all contend for the owners' lines: the engine's loops use a split
  /// for teams of up to kMaxParts threads and their static schedule beyond).
  static constexpr int kMaxParts = 32;
  /// Whether a team of n_threads should share a loop with a WorkSplit: 2 to kMaxParts threads
  /// (one thread has nothing to balance; wider teams keep their static schedule, above).
  static constexpr bool suits(int n_threads) { return n_threads >= 2 && n_threads <= kMaxParts; }
  /// Largest n_items: front and back of a range are 32-bit fields, and front + 1 <= back must
  /// not carry into the back's field (2^31 leaves that margin).
  static constexpr int64_t kMaxItems = int64_t{1} << 31;

  /// Splits [0, n_items) into min(parts, kMaxParts) ranges of nearly equal size (parts >= 1;
  /// 0 <= n_items <= kMaxItems, asserted in debug builds).
  void reset(int64_t n_items, int parts) {
    assert(n_items >= 0 && n_items <= kMaxItems);
    parts_ = std::clamp(parts, 1, kMaxParts);
    items_ = n_items;
    for (int p = 0; p < parts_; ++p) set(p, n_items * p / parts_, n_items * (p + 1) / parts_);
  }

  /// Ranges given by their starts: range p = [start(p), start(p + 1)) for p < parts, with
  /// start(parts) the end of the last one (start non-decreasing from start(0) = 0 up to at most
  /// kMaxItems; 1 <= parts <= kMaxParts; asserted in debug builds).
  template <class Start>
  void reset_at(int parts, Start&& start) {
    assert(parts >= 1 && parts <= kMaxParts);
    parts_ = parts;
    for (int p = 0; p < parts_; ++p) {
      const int64_t front = start(p), back = start(p + 1);
      assert(front >= 0 && front <= back && back <= kMaxItems);
      set(p, front, back);
    }
    items_ = start(parts_);
  }

  /// Ranges in use (0 before the first reset).
  int parts() const { return parts_; }
  /// Items of the loop last reset.
  int64_t items() const { return items_; }

  /// Sets `item` to the next item for team thread `me` (>= 0) and returns true: the front of
  /// range `me` while it has items, then the back of the next non-empty range after it (in
  /// cyclic order). Returns false when every range is empty.
  bool next(int me, int64_t& item) {
    if (me < parts_ && take(range_[me].v, true, item)) return true;
    for (int k = 1; k <= parts_; ++k)
      if (take(range_[(me + k) % parts_].v, false, item)) return true;
    return false;
  }

 private:
  /// Takes the front (or the back) item of the range packed in `word` (front | back << 32).
  static bool take(uint64_t& word, bool front, int64_t& item) {
    std::atomic_ref<uint64_t> v(word);
    uint64_t cur = v.load(std::memory_order_relaxed);
    for (;;) {
      const uint64_t f = cur & 0xFFFFFFFFu, b = cur >> 32;
      if (f >= b) return false;
      const uint64_t want = front ? ((f + 1) | (b << 32)) : (f | ((b - 1) << 32));
      // Relaxed is enough: the claim only has to be unique (every read-modify-write of v is in
      // one modification order); the results are published by the region's closing barrier.
      if (v.compare_exchange_weak(cur, want, std::memory_order_relaxed)) {
        item = static_cast<int64_t>(front ? f : b - 1);
        return true;
      }
    }
  }

  void set(int p, int64_t front, int64_t back) {
    std::atomic_ref<uint64_t>(range_[p].v)
        .store(static_cast<uint64_t>(front) | (static_cast<uint64_t>(back) << 32), std::memory_order_relaxed);
  }

  struct alignas(64) Range {  // one cache line per range: owners do not share lines
    uint64_t v;               // front | back << 32, accessed through std::atomic_ref only
  };
  static_assert(std::atomic_ref<uint64_t>::required_alignment <= alignof(Range));
  Range range_[kMaxParts];
  int parts_ = 0;
  int64_t items_ = 0;
};

/// Whether a loop shares its items out with WorkSplit (true) or statically (false): true unless
/// the environment variable `env` (SNAPKV_MATMUL_STEAL, SNAPKV_DECODE_STEAL) is "0", the switch
/// for comparisons. Callers read it once.
inline bool work_stealing_enabled(const char* env) {
  const char* e = std::getenv(env);
  return !(e != nullptr && std::string_view(e) == "0");
}

}  // namespace snapkv
