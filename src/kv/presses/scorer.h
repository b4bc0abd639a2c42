// snapkv presses: what one press file provides — a Scorer (per-(KV head, position) scores) and
// a PressDef (its name, documentation, default allocator and sinks, its own keys, how to build the
// scorer from a validated spec). Everything else is shared (press_base.cpp): input validation,
// keep-all when the prompt fits, window and sink protection, the budget allocators (uniform,
// pyramid, ada) and deterministic top-k.
//
// Adding a press `foo`: write foo.cpp defining a Scorer and `const PressDef& foo_press()`, and add
// the line `X(foo)` to SNAPKV_PRESS_REGISTRY below (knorm.cpp is the smallest example).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kv/presses/params.h"
#include "kv/presses/press.h"
#include "kv/presses/scoring.h"

namespace snapkv::press_detail {

/// Scores prompt positions; the shared base keeps the best ones.
class Scorer {
 public:
  virtual ~Scorer() = default;
  /// Scores of positions 0..n-1 per KV head, [in.n_head_kv][n]; a higher score is kept first
  /// (ties: the earlier position; NaN ranks as -inf). n = L - in.window: the window itself is
  /// always kept. Called only when L > C, after the input was validated; OpenMP regions must use
  /// num_threads(in.n_threads).
  virtual HeadScores score(const PressInput& in, int64_t n) const = 0;
  /// True if score() reads PressInput::all_q.
  virtual bool needs_all_queries() const { return false; }
  /// False if the scores only encode a fixed order of positions (recency, streamingllm): the kept
  /// positions are then reported with score +inf, as kept unconditionally.
  virtual bool reports_scores() const { return true; }
};

/// One press of the registry.
struct PressDef {
  std::string name = {};
  std::string doc = {};               ///< one line: what it keeps and the paper (press_params(), docs)
  std::string alloc = "uniform";      ///< default allocator: uniform | pyramid | ada
  int64_t sinks = 0;                  ///< default of the `sinks` key
  std::vector<ParamDef> params = {};  ///< the scorer's own keys (the common ones are added by the factory)
  /// Builds the scorer from a canonical spec (every key present and valid); empty for `none`.
  std::function<std::unique_ptr<Scorer>(const ParamValues&)> make = nullptr;
};

/// `pool` / `gqa_agg` of a canonical spec (keys of pool_param() / gqa_agg_param()).
PoolType pool_type(const ParamValues& p);
GQAAgg gqa_agg(const ParamValues& p);

// The registry, in help order: one line per press; each X(foo) is defined in foo.cpp.
#define SNAPKV_PRESS_REGISTRY(X) \
  X(none)                        \
  X(snapkv)                      \
  X(pyramidkv)                   \
  X(adakv)                       \
  X(streamingllm)                \
  X(h2o)                         \
  X(tova)                        \
  X(knorm)                       \
  X(random)

#define SNAPKV_PRESS_DECLARE(name) const PressDef& name##_press();
SNAPKV_PRESS_REGISTRY(SNAPKV_PRESS_DECLARE)
#undef SNAPKV_PRESS_DECLARE

}  // namespace snapkv::press_detail
