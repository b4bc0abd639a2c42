// snapkv server: KV projection and the budget (see admission.h).
#include "server/admission.h"

#include <algorithm>

namespace snapkv::server {

KvProjection project_kv(const ModelInfo& info, KVType k_type, KVType v_type, int64_t n_prompt, int64_t max_tokens,
                        const PressPlanSummary& plan) {
  const auto per_token = static_cast<size_t>(info.n_head_kv) * kv_entry_bytes(k_type, v_type, info.head_dim);
  const auto bytes = [per_token](int64_t tokens) {
    return static_cast<size_t>(std::max<int64_t>(tokens, 0)) * per_token;
  };
  const int64_t n = std::max<int64_t>(n_prompt, 0);
  const int64_t g = std::max<int64_t>(max_tokens, 0);
  KvProjection p;
  size_t before = 0;  // layers already prefilled (compressed / trimmed)
  for (int l = 0; l < info.n_layer; ++l) {
    const int w = l < static_cast<int>(info.layer_window.size()) ? info.layer_window[static_cast<size_t>(l)] : 0;
    int64_t kept = 0, grown = 0;
    if (w > 0) {
      kept = std::min<int64_t>(n, w - 1);
      grown = std::min<int64_t>(n + g, w - 1 + info.window_slack);  // decode trims only past the slack
    } else {
      kept = plan.compress ? std::min(n, plan.capacity) : n;
      grown = kept + g;
    }
    p.prefill_peak = std::max(p.prefill_peak, before + bytes(n));
    before += bytes(kept);
    p.final_bytes += bytes(grown);
    p.full_bytes += bytes(w > 0 ? std::min<int64_t>(n + g, w) : n + g);
  }
  p.after_prefill = before;
  return p;
}

bool KvBudget::try_reserve(size_t bytes) {
  if (budget_ != 0 && (bytes > budget_ || reserved_ > budget_ - bytes)) return false;
  reserved_ += bytes;
  return true;
}

void KvBudget::release(size_t bytes) { reserved_ = bytes > reserved_ ? 0 : reserved_ - bytes; }

}  // namespace snapkv::server
