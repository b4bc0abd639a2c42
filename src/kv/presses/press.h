// snapkv: presses (KV-cache compression policies) behind one interface.
//
// A press runs once per compressible layer at the end of prefill (one-shot, before decoding):
// it sees that layer's prompt keys/values per KV head and the observation-window queries and
// returns, per KV head, the ascending positions to keep. The engine then frees the rest.
// Sliding-window layers are never handed to a press.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/rows_view.h"

namespace snapkv {

enum class PoolType { Max, Avg };
enum class GQAAgg { Mean, Max, Sum };

/// User settings of a press (CLI flags). Exactly one of budget / compression_ratio is set
/// (budget > 0, or 0 <= compression_ratio < 1).
struct PressConfig {
  std::string name = "none";      ///< none|snapkv|pyramidkv|adakv|streamingllm|h2o|tova|knorm|random
  int64_t budget = 0;             ///< C: tokens kept per KV head, window included (SnapKV's convention)
  double compression_ratio = -1;  ///< fraction of prompt positions removed (kvpress's convention)
  int window = 32;                ///< W: observation window (recent tokens always kept)
  int kernel = 7;                 ///< K: 1D pooling kernel (odd)
  PoolType pool = PoolType::Max;
  GQAAgg gqa_agg = GQAAgg::Mean;
  int sinks = 4;             ///< S: attention sinks for streamingllm
  double pyramid_beta = 20;  ///< PyramidKV beta
  double adakv_alpha = 0.2;  ///< AdaKV safeguard fraction
  uint64_t seed = 0;         ///< for `random`
};

/// Everything a press sees for one layer, after that layer's whole prompt has been processed.
struct PressInput {
  int layer = 0;              ///< model layer index
  int compress_index = 0;     ///< index among the compressed (full-attention) layers, 0-based
  int n_compress_layers = 1;  ///< number of compressed layers in the model
  int64_t n_tokens = 0;       ///< L: prompt tokens in this layer's cache; entry i has position i
  int n_head = 0;             ///< query heads
  int n_head_kv = 0;          ///< KV heads; query head h uses KV head h / (n_head / n_head_kv)
  int head_dim = 0;
  float attn_scale = 1.0f;  ///< logit = attn_scale * dot(q, k)
  int window = 0;           ///< W rows in window_q
  /// [n_head][window][head_dim] f32: queries of prompt positions L-W..L-1 exactly as attention
  /// uses them (after Q-norm and RoPE, before attn_scale).
  const float* window_q = nullptr;
  /// [n_head][L][head_dim] f32: all prompt queries; only when Press::needs_all_queries().
  const float* all_q = nullptr;
  std::vector<RowsView> keys;    ///< per KV head: L keys after RoPE
  std::vector<RowsView> values;  ///< per KV head: L values
};

/// What a press keeps in one layer: per KV head, ascending unique positions in [0, L) and
/// the score that ranked each kept position (the pooled score for SnapKV; +inf for positions
/// kept unconditionally: window, sinks).
struct PressResult {
  std::vector<std::vector<int32_t>> kept;
  std::vector<std::vector<float>> scores;
};

/// A compression policy. Implementations live in src/kv/presses/, one file each.
class Press {
 public:
  virtual ~Press() = default;
  virtual std::string_view name() const = 0;
  /// True if compress() needs PressInput::all_q (H2O).
  virtual bool needs_all_queries() const { return false; }
  /// Selects the positions to keep. Called only when L > capacity. `capacity` = C tokens per
  /// KV head (window included); a press may distribute a layer's total differently across
  /// heads (adakv) or layers (pyramidkv) but keeps the documented totals.
  virtual PressResult compress(const PressInput& in, int64_t capacity) const = 0;
};

/// Builds the press named by cfg.name. Throws snapkv::Error for an unknown name or invalid
/// settings (kernel even or outside [1, 2^24], window outside [1, 2^24], sinks of streamingllm
/// outside [0, 2^24], budget < window (+ sinks), ratio outside [0,1)).
std::unique_ptr<Press> make_press(const PressConfig& cfg);

/// Capacity C for a prompt of L tokens: cfg.budget, or L - floor(L * ratio) (at least window).
/// Throws snapkv::Error when compression applies (L > C) but W >= L or C < W.
int64_t press_capacity(const PressConfig& cfg, int64_t n_tokens);

/// The names make_press() accepts, in help order.
std::vector<std::string> press_names();

}  // namespace snapkv
