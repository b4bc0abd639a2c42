// snapkv runtime: the settings of a re-selection (PrefillOptions::reselect), read from the
// canonical spec of the press that compressed the sequence.
#pragma once

#include <cstdint>
#include <string>

#include "kv/presses/press.h"

namespace snapkv {

struct ReselectParams {
  int window = 32;  ///< W: question queries that score (<= the question's tokens)
  int kernel = 7;   ///< SnapKV pooling kernel (odd)
  PoolType pool = PoolType::Max;
  GQAAgg agg = GQAAgg::Mean;
  int64_t sinks = 0;  ///< first positions always kept
};

/// SnapKV's scoring settings of `canonical_spec` (kernel, pool, gqa_agg, sinks; the defaults 7,
/// max, mean, 0 for a press without them) and the window for a question of `question_tokens`
/// (>= 1) tokens: the spec's window, or with window=question the question clamped to
/// [window_min, window_max]; never more than question_tokens.
ReselectParams reselect_params(const std::string& canonical_spec, int64_t question_tokens);

}  // namespace snapkv
