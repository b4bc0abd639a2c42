// snapkv: press specs — a KV-cache compression policy ("press") and its settings as one string.
//
// Syntax: `name` or `name:key=value,key=value,...`, e.g.
//   snapkv:budget=1024,window=32,kernel=7,pool=max
//   adakv:ratio=0.5,alpha=0.2
//   knorm:budget=512,alloc=ada
// The server and the evaluation harness pass these per request; the CLI builds one from its flags.
// press_names() lists the presses, press_params() the keys of one press with their defaults and
// meaning, validate_press_spec() checks a whole spec without a prompt (docs/presses.md has the
// table of every press's keys).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace snapkv {

/// A press name and its settings, in the order given. Only the syntax is checked by parse();
/// validate_press_spec() (and the engine, when it builds the press) checks names, keys and values.
struct PressSpec {
  std::string name = "none";
  std::vector<std::pair<std::string, std::string>> params;  ///< (key, value), keys unique

  /// Parses `name` or `name:key=value,...`. Names and keys are non-empty runs of letters,
  /// digits, '_' and '-'; a value is a non-empty run of any characters but ',', '=' and
  /// whitespace. Throws snapkv::Error naming the 1-based position and the offending text for an
  /// empty spec or name, a ':' with no settings after it, an empty item (",,", trailing ','), a
  /// missing '=', an empty key or value, a character outside these sets, or a key given twice.
  static PressSpec parse(std::string_view text);

  /// The spec as parse() reads it: `name`, or `name:k=v,...` in params order.
  /// parse(s.to_string()) == s for every spec whose name, keys and values follow the syntax.
  std::string to_string() const;

  /// Sets `key` to `value`: replaces the value in place when the key is present, else appends.
  void set(std::string key, std::string value);

  /// The value of `key`, or nullopt when absent.
  std::optional<std::string> get(std::string_view key) const;

  friend bool operator==(const PressSpec&, const PressSpec&) = default;
};

/// The press names, in help order ("none" first).
std::vector<std::string> press_names();

/// One key a press accepts: its default (as text; empty when there is none, e.g. `ratio`) and
/// a one-line description (units, range, source).
struct PressParamInfo {
  std::string key, default_value, doc;
};

/// The keys press `name` accepts, common ones first (budget, ratio, window, sinks, alloc and the
/// allocator's beta / alpha), then the scorer's own. `none` accepts none. Throws snapkv::Error for
/// an unknown press, listing the valid names.
std::vector<PressParamInfo> press_params(std::string_view name);

/// Checks a spec completely without a prompt; throws snapkv::Error (one line) for the first
/// problem: unknown press (listing the valid ones); `none` with any key; a key the press does not
/// have (naming the key, the press and its valid keys) or given twice; a malformed or
/// out-of-range value (window in [1, 2^24] or `question`, then window_min <= window_max in
/// [1, 2^24], and window_min / window_max only with it; kernel odd in [1, 2^24]; sinks in [0, 2^24]; budget
/// an integer >= 1; ratio in [0, 1); pool max|avg; gqa_agg mean|max|sum; alloc
/// uniform|pyramid|ada; beta finite >= 1; alpha in [0, 1]; seed an unsigned 64-bit integer);
/// both budget and ratio; budget < window + sinks; beta without alloc=pyramid or alpha without
/// alloc=ada. A compressing press given neither budget nor ratio uses budget=1024.
void validate_press_spec(const PressSpec& spec);

/// What a press does to a prompt of a given length, known before any computation (the server's
/// admission uses it to project a request's KV bytes).
struct PressPlanSummary {
  std::string spec = "none";  ///< canonical spec of the press
  bool compress = false;      ///< the press removes entries from this prompt
  int64_t capacity = 0;       ///< C: tokens kept per KV head of a compressed layer (compress only)
  std::string note;           ///< why a requested press keeps the prompt whole ("" otherwise)
  int window = 0;             ///< W: observation window of this prompt (compress only)
};

/// The plan of `spec` for a prompt of `n_tokens` tokens, exactly as a prefill with that press
/// makes it: a prompt no longer than the budget, or not longer than window + sinks, is kept whole
/// with a note. Throws snapkv::Error for a bad spec (as validate_press_spec).
/// `question_tokens`: the prompt's question span, its last tokens (the last user turn and the chat
/// template's closing tokens), 0 when unknown; `window=question` makes it the observation window,
/// clamped to [window_min, window_max] (32 clamped when unknown). Throws snapkv::Error also for
/// question_tokens outside [0, n_tokens].
PressPlanSummary plan_press_spec(const PressSpec& spec, int64_t n_tokens, int64_t question_tokens = 0);

}  // namespace snapkv
