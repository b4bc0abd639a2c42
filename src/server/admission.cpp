// snapkv server: KV projection and the budget (see admission.h).
#include "server/admission.h"

#include <algorithm>
#include <string>

namespace snapkv::server {

KvProjection project_kv(const ModelInfo& info, KVType k_type, KVType v_type, int64_t n_prompt, int64_t max_tokens,
                        const PressPlanSummary& plan, int64_t reselect_tokens) {
  const auto per_token = static_cast<size_t>(info.n_head_kv) * kv_entry_bytes(k_type, v_type, info.head_dim);
  const auto bytes = [per_token](int64_t tokens) {
    return static_cast<size_t>(std::max<int64_t>(tokens, 0)) * per_token;
  };
  const int64_t n = std::max<int64_t>(n_prompt, 0);
  const int64_t g = std::max<int64_t>(max_tokens, 0);
  const auto window_of = [&info](int l) {
    return l < static_cast<int>(info.layer_window.size()) ? info.layer_window[static_cast<size_t>(l)] : 0;
  };
  int64_t n_full = 0;  // full-attention layers (those a press compresses)
  for (int l = 0; l < info.n_layer; ++l) n_full += window_of(l) == 0 ? 1 : 0;
  const int64_t kept_full = plan.compress ? std::min(n, plan.capacity) : n;
  // The window (at least) stays in every compressed layer, whatever the allocator.
  const int64_t least_kept = plan.compress ? std::min<int64_t>(kept_full, std::max(plan.window, 0)) : n;
  const bool uneven = plan.compress && plan.spec.find("alloc=pyramid") != std::string::npos;
  KvProjection p;
  size_t before_window = 0;  // sliding-window layers already prefilled (trimmed)
  int64_t full_before = 0;   // full-attention layers already prefilled
  for (int l = 0; l < info.n_layer; ++l) {
    const int w = window_of(l);
    int64_t kept = 0, grown = 0;
    if (w > 0) {
      kept = std::min<int64_t>(n, w - 1);
      grown = std::min<int64_t>(n + g, w - 1 + info.window_slack);  // decode trims only past the slack
    } else {
      kept = kept_full;
      grown = kept + g;
    }
    int64_t full_prefix = full_before * kept_full;
    if (uneven)
      full_prefix = std::min(2 * kept_full * full_before, kept_full * n_full - least_kept * (n_full - full_before));
    p.prefill_peak = std::max(p.prefill_peak, before_window + bytes(full_prefix) + bytes(n));
    if (w > 0)
      before_window += bytes(kept);
    else
      ++full_before;
    p.final_bytes += bytes(grown);
    p.full_bytes += bytes(w > 0 ? std::min<int64_t>(n + g, w) : n + g);
  }
  p.after_prefill = before_window + bytes(kept_full * n_full);
  if (reselect_tokens > 0 && plan.compress && n_full > 0) {
    const int64_t fewest = uneven ? least_kept : kept_full;  // entries of the layer restored whole
    p.prefill_peak =
        std::max(p.prefill_peak,
                 p.after_prefill + bytes(reselect_tokens) * static_cast<size_t>(info.n_layer) + bytes(n - fewest));
  }
  return p;
}

bool KvBudget::try_reserve(size_t bytes) {
  if (budget_ != 0 && (bytes > budget_ || reserved_ > budget_ - bytes)) return false;
  reserved_ += bytes;
  return true;
}

void KvBudget::release(size_t bytes) { reserved_ = bytes > reserved_ ? 0 : reserved_ - bytes; }

}  // namespace snapkv::server
