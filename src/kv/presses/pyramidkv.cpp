// snapkv press `pyramidkv`: Cai et al., "PyramidKV: Dynamic KV Cache Compression based on
// Pyramidal Information Funneling", arXiv 2406.02069, Sec. 3. SnapKV's pooled window scores
// (snapkv.cpp) with the pyramid allocator (alloc=pyramid, press_base.h): the free budget of
// compressed layer i (in.compress_index of in.n_compress_layers) decreases linearly from
// max = 2P - P/beta (first compressed layer) to min = P/beta (last), P = C - W - S; the window
// (and sinks) are added on top. The budgets of all compressed layers sum to exactly
// n_compress_layers * P; when the prompt is too short for the pyramid (max > L - W - S) every
// layer keeps the uniform P (see pyramid_budgets()).
#include "kv/presses/scorer.h"

namespace snapkv::press_detail {

const PressDef& pyramidkv_press() {
  static const PressDef def = [] {
    PressDef d = snapkv_press();
    d.name = "pyramidkv";
    d.doc = "SnapKV scores, budgets decreasing with depth (Cai et al. 2024, arXiv 2406.02069)";
    d.alloc = "pyramid";
    return d;
  }();
  return def;
}

}  // namespace snapkv::press_detail
