// snapkv eval: RULER's scorers (scripts/eval/synthetic/constants.py and evaluate.py's
// postprocess_pred), re-implemented: a prediction is stripped and its control characters turned
// into newlines; a reference matches when it occurs in the prediction, ignoring ASCII case.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace snapkv::eval {

/// Strips surrounding whitespace, turns each byte in [0x00, 0x1f] into '\n', strips again.
std::string postprocess_pred(std::string_view pred);

/// Share of `refs` that occur in `pred` (ASCII case-insensitive), in [0, 1]; 0 for no refs.
/// RULER's per-sample string_match_all (its task score is the mean x 100, rounded to 2 places).
double string_match_all(std::string_view pred, const std::vector<std::string>& refs);

/// 1 if any of `refs` occurs in `pred` (ASCII case-insensitive), else 0 (RULER's string_match_part).
double string_match_part(std::string_view pred, const std::vector<std::string>& refs);

/// How often `needle` occurs in `text` (non-overlapping, case-sensitive); 0 for an empty needle.
size_t count_occurrences(std::string_view text, std::string_view needle);

}  // namespace snapkv::eval
