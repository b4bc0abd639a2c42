// snapkv press `adakv`: Feng et al., "Ada-KV: Optimizing KV Cache Eviction by Adaptive Budget
// Allocation for Efficient LLM Inference", arXiv 2407.11550, Alg. 1 (with its safeguard).
// SnapKV's pooled window scores (snapkv.cpp) with the ada allocator (alloc=ada, press_base.h):
// the layer's H_kv * (C - W - S) free slots are shared by the heads: each head first gets its own
// top floor(alpha * (C - W - S)) positions, the rest go to the highest remaining scores of all
// heads together; every head also keeps the W window positions (and the S sinks). Heads end with
// different lengths; the layer total is exactly H_kv * C. With one KV head this is SnapKV.
#include "kv/presses/scorer.h"

namespace snapkv::press_detail {

const PressDef& adakv_press() {
  static const PressDef def = [] {
    PressDef d = snapkv_press();
    d.name = "adakv";
    d.doc = "SnapKV scores, the layer's budget shared by its KV heads (Feng et al. 2024, arXiv 2407.11550)";
    d.alloc = "ada";
    return d;
  }();
  return def;
}

}  // namespace snapkv::press_detail
