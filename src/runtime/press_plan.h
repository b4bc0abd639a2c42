// snapkv runtime: what the engine needs of a press for one prompt (built from a PressSpec).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kv/presses/press.h"
#include "snapkv/press_spec.h"

namespace snapkv {

struct PressPlan {
  std::unique_ptr<Press> press;  ///< null when nothing is compressed
  std::string spec = "none";     ///< canonical spec of the requested press
  int window = 0;                ///< observation window W of this prompt (window=question: its question span, clamped)
  bool needs_all_queries = false;
  bool compress = false;  ///< the press removes entries from this prompt
  int64_t capacity = 0;   ///< C: tokens kept per KV head (compress only)
  std::string note;       ///< why a requested press keeps everything ("" otherwise)
};

/// The plan of `spec` for a prompt of `n_tokens` tokens whose last `question_tokens` are its
/// question span (0: unknown; only window=question reads it). A prompt no longer than the budget,
/// or too short to compress (not longer than window + sinks), is kept whole with a note. Throws
/// snapkv::Error for a bad spec (unknown press or key, bad value) or question_tokens outside
/// [0, n_tokens].
PressPlan plan_press(const PressSpec& spec, int64_t n_tokens, int64_t question_tokens = 0);

/// Throws snapkv::Error for a bad spec (without a prompt).
void validate_press(const PressSpec& spec);

}  // namespace snapkv
