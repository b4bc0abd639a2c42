// snapkv: presses (KV-cache compression policies) behind one interface.
//
// A press runs once per compressible layer at the end of prefill (one-shot, before decoding):
// it sees that layer's prompt keys/values per KV head and the observation-window queries and
// returns, per KV head, the ascending positions to keep. The engine then frees the rest.
// Sliding-window layers are never handed to a press.
//
// Engine use:
//   auto press = make_press(PressSpec::parse("snapkv:budget=1024"));   // validates the spec
//   const Press::Plan plan = press->plan(L);                           // compress? capacity C
//   collect press->window() window queries (and all queries if press->needs_all_queries());
//   per full-attention layer: press->compress(input, plan.capacity)    // only when plan.compress
// Design (scorer / shared base / allocator / spec): docs/presses.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/rows_view.h"
#include "snapkv/press_spec.h"

namespace snapkv {

enum class PoolType { Max, Avg };
enum class GQAAgg { Mean, Max, Sum };

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
  int window = 0;           ///< W rows in window_q (the engine passes Press::window())
  int n_threads = 1;        ///< OpenMP threads the scoring kernels use (>= 1); results do not depend on it
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

/// Settings every press resolves from its spec (internal; see PressSpec for the keys).
struct PressSettings {
  bool compresses = false;       ///< false only for `none`
  int64_t budget = 0;            ///< C tokens per KV head, window included; 0 when `ratio` is used
  double ratio = -1;             ///< fraction of prompt positions removed, in [0, 1); -1 when `budget` is used
  int window = 0;                ///< W; with question_window the largest W (window_max)
  bool question_window = false;  ///< window=question: W = the question span clamped to [window_min, window]
  int window_min = 0;            ///< question_window only
  int64_t sinks = 0;             ///< S
  int64_t span_gap = 0;          ///< G: span closing of the picks (span_closing.h); 0 = plain top-k
};

/// A compression policy, built by make_press() from a spec.
class Press {
 public:
  /// What to do with a prompt of L tokens.
  struct Plan {
    bool compress = false;  ///< false: keep every token (reason says why); never an error
    int64_t capacity = 0;   ///< C tokens per KV head: the budget, or L - floor(L * ratio)
    std::string reason;     ///< why compress is false (empty when it is true)
    /// W of this prompt: the fixed window, or with window=question the question span clamped to
    /// [window_min, window_max] (kDefaultQuestionWindow when the caller gave no span). 0 for none.
    int window = 0;
  };

  /// The question-aligned window of a prompt whose question span is unknown (question_tokens 0):
  /// the paper's W = 32, clamped to [window_min, window_max].
  static constexpr int kDefaultQuestionWindow = 32;

  virtual ~Press() = default;
  std::string_view name() const { return spec_.name; }
  /// Canonical spec: every key with its resolved value (budget or ratio, window, sinks, alloc,
  /// the allocator's beta / alpha, the scorer's keys); make_press(spec()) builds the same press.
  const PressSpec& spec() const { return spec_; }
  /// W: the window queries the engine must collect at most (window=question: window_max); the
  /// last plan(L).window positions are always kept. 0 for none.
  int window() const { return settings_.window; }
  /// True for window=question: the window of each prompt comes from its question span (plan()).
  bool question_window() const { return settings_.question_window; }
  /// S: the first S positions (attention sinks), always kept.
  int64_t sinks() const { return settings_.sinks; }
  /// True if compress() needs PressInput::all_q (H2O).
  virtual bool needs_all_queries() const { return false; }

  /// The capacity and window for a prompt of `n_tokens` tokens and whether to compress it:
  /// compress = false when the press is `none`, when L <= C ("prompt of L tokens fits the budget
  /// C") or when L <= W + S (too short to compress); such prompts are served uncompressed.
  /// `question_tokens`: the length of the prompt's question span (its last tokens: the last user
  /// turn and the chat template's closing tokens), 0 when unknown; only window=question reads it.
  /// Throws snapkv::Error for n_tokens < 0, question_tokens outside [0, n_tokens], and when a ratio
  /// leaves C < W + S tokens of a longer prompt.
  Plan plan(int64_t n_tokens, int64_t question_tokens = 0) const;

  /// Selects the positions to keep; `capacity` = C tokens per KV head (window and sinks
  /// included). C >= L keeps everything. A press may distribute a layer's total differently
  /// across heads (alloc=ada) or layers (alloc=pyramid) but keeps the documented totals.
  /// Throws snapkv::Error naming the press, layer and field for an inconsistent input.
  virtual PressResult compress(const PressInput& in, int64_t capacity) const = 0;

 private:
  Plan plan_with_window(int64_t L, int W) const;

 protected:
  Press(PressSpec canonical, PressSettings settings) : spec_(std::move(canonical)), settings_(settings) {}
  const PressSettings& settings() const { return settings_; }

 private:
  PressSpec spec_;
  PressSettings settings_;
};

/// Builds the press a spec describes (validate_press_spec() rules; same errors).
std::unique_ptr<Press> make_press(const PressSpec& spec);

// ---------------------------------------------------------------------------------------------
// Compatibility with the flat per-flag settings (used by src/runtime and src/cli until they move
// to PressSpec; behaviour and messages exactly as before the spec redesign).

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
  int64_t span_gap = 0;      ///< G: span-preserving selection of every compressing press (0: plain top-k)
};

/// The spec of a config that passes make_press(cfg)'s checks: the keys its press owns (sinks only
/// for streamingllm, kernel/pool for the SnapKV family, gqa_agg, seed, beta/alpha); `none`
/// becomes plain "none" (its budget is ignored).
PressSpec to_spec(const PressConfig& cfg);

/// make_press(to_spec(cfg)) after the flag-named checks: throws snapkv::Error for an unknown name
/// or invalid settings (kernel even or outside [1, 2^24], window outside [1, 2^24], sinks of
/// streamingllm outside [0, 2^24], budget < window (+ sinks), ratio outside [0,1)).
std::unique_ptr<Press> make_press(const PressConfig& cfg);

/// Capacity C for a prompt of L tokens: cfg.budget, or L - floor(L * ratio) (at least window).
/// Throws snapkv::Error when compression applies (L > C) but W >= L or C < W.
int64_t press_capacity(const PressConfig& cfg, int64_t n_tokens);

}  // namespace snapkv
