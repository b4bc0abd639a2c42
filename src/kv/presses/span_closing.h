// snapkv presses: span-preserving selection (key `span_gap`, issue 11; docs/presses.md, "The shared
// base", step 6). Plain top-k can keep the digits around a number and evict the ones inside it ("111..11"
// in a kept set): a model asked to copy the number then copies a wrong one. Closing the kept set
// (mathematical morphology: a dilation then an erosion, here on one axis) fills such holes:
//   1. fill: every gap of 1..G unkept positions between two kept positions of the head (picks,
//      the sinks block on the left, the window on the right) is kept as well;
//   2. pay: the filled positions are paid for by dropping, one at a time, the lowest-scored end
//      of a run of kept positions (never a sink or window position), so the head keeps exactly
//      as many positions as the allocator picked. Dropping a run's end widens a gap that is
//      already longer than G, so no new hole of <= G positions opens; a run is eaten from its
//      ends only, never split. (When one run covers every candidate, its lowest-scored position
//      goes: the only case that can open a hole.)
// Ties drop the later position first (top-k keeps the earlier one); NaN scores rank as -inf.
// G = 0 returns the picks unchanged: plain SnapKV stays the paper's algorithm.
#pragma once

#include <cstdint>
#include <vector>

namespace snapkv::press_detail {

/// The picks of one KV head after span closing with gap `gap` (steps above). `picks`: ascending
/// unique positions in [first, end), where first = S (the sinks 0..S-1 are kept) and end = L - W
/// (the window L-W..L-1 is kept); `scores`: the scorer's scores of positions 0..end-1 (at least
/// `end` values). Returns ascending positions in [first, end), exactly picks.size() of them.
/// Requires 0 <= first <= end, gap >= 0 (unchecked: the shared base passes validated values).
std::vector<int32_t> close_spans(const std::vector<int32_t>& picks, const std::vector<float>& scores, int64_t first,
                                 int64_t end, int64_t gap);

}  // namespace snapkv::press_detail
