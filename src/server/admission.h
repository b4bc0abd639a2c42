// snapkv server: admission by KV memory. project_kv() is the most KV bytes a request can hold
// (its compressed size after prefill, its prefill peak, and the growth from max_tokens);
// KvBudget counts the bytes reserved by admitted requests against --kv-memory-budget.
#pragma once

#include <cstddef>
#include <cstdint>

#include "snapkv/engine.h"
#include "snapkv/kv_type.h"
#include "snapkv/press_spec.h"

namespace snapkv::server {

struct KvProjection {
  size_t after_prefill = 0;  ///< held once the prompt is prefilled (compressed, windows trimmed)
  size_t prefill_peak = 0;   ///< most held during the layer-major prefill
  size_t final_bytes = 0;    ///< after_prefill plus max_tokens generated tokens
  size_t full_bytes = 0;     ///< an uncompressed cache of prompt + max_tokens (for reference)
  /// What admission reserves: max(prefill_peak, final_bytes).
  size_t reserve() const { return prefill_peak > final_bytes ? prefill_peak : final_bytes; }
};

/// Per layer l with bytes per token b = n_head_kv x kv_entry_bytes(k_type, v_type, head_dim):
///   full-attention layer: after prefill min(n, C) tokens if the plan compresses, else n;
///                         then + max_tokens;
///   sliding-window layer (window w, slack s = ModelInfo::window_slack): min(n, w - 1), then at
///                         most min(n + max_tokens, w - 1 + s) (decode trims only past the slack);
///   prefill peak: max over l of (layers before l after prefill) + n tokens of layer l; with a
///                 press that allocates unevenly across layers (alloc=pyramid in plan.spec: the
///                 early layers keep more, the totals are the same), the layers before l are
///                 bounded by min(2 C l, C L_c - W (L_c - l)) over the L_c compressed layers (each
///                 keeps at least its window W and at most 2 C);
///   reselect_tokens q > 0 (a question prefilled after the compressed prompt with re-selection
///                 from the cold tier, PrefillOptions::reselect): every layer holds its kept
///                 entries plus q while one compressed layer is restored whole (n + q), so the
///                 peak is also at least after_prefill + L q + (n - the fewest a compressed layer
///                 keeps) tokens' bytes.
/// Then max_tokens counts q too (the question is held uncompressed, as generated tokens are).
KvProjection project_kv(const ModelInfo& info, KVType k_type, KVType v_type, int64_t n_prompt, int64_t max_tokens,
                        const PressPlanSummary& plan, int64_t reselect_tokens = 0);

/// Bytes reserved against a budget (0 = unlimited). Not thread-safe: the scheduler calls it under
/// its lock.
class KvBudget {
 public:
  explicit KvBudget(size_t budget) : budget_(budget) {}
  size_t budget() const { return budget_; }
  size_t reserved() const { return reserved_; }
  /// True if `bytes` could ever be reserved (alone, with nothing else reserved).
  bool could_fit(size_t bytes) const { return budget_ == 0 || bytes <= budget_; }
  /// Reserves `bytes` if they fit next to what is reserved; false otherwise.
  bool try_reserve(size_t bytes);
  /// Returns a reservation (bytes previously reserved).
  void release(size_t bytes);

 private:
  size_t budget_;
  size_t reserved_ = 0;
};

}  // namespace snapkv::server
