// snapkv: an inference session: KV cache + layer-major prefill with one-shot prompt
// compression (SnapKV, Li et al. 2024, arXiv 2404.14469, Sec. 4: compress each layer's prompt
// KV right after the prompt has gone through it) + token-by-token decoding.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "attention/attention.h"
#include "kv/kv_cache.h"
#include "kv/presses/press.h"
#include "model/model.h"

namespace snapkv {

struct SessionOptions {
  int64_t n_ctx = 0;  ///< context size in tokens; 0 = the model's n_ctx_train
  KVType kv_type = KVType::F16;
  PressConfig press;        ///< name "none" = no compression
  int prefill_chunk = 512;  ///< tokens per block call inside a layer (bounds activation memory)
};

/// What one press call kept in one layer: per KV head, ascending positions and their scores.
struct KeptLayer {
  int layer = 0;
  std::vector<std::vector<int32_t>> positions;
  std::vector<std::vector<float>> scores;
};

struct SessionStats {
  double prefill_ms = 0;           ///< wall time of prefill() calls (compression included)
  double compression_ms = 0;       ///< time inside presses + compaction
  size_t kv_cache_bytes = 0;       ///< bytes held now (K+V payload of every stored entry)
  size_t peak_kv_cache_bytes = 0;  ///< max of kv_cache_bytes over the session (sampled after every append/compaction)
  size_t kv_cache_bytes_full =
      0;  ///< an uncompressed cache for the same tokens (SWA layers: what they hold; == kv_cache_bytes for press none)
  std::vector<double> kept_tokens_per_layer;  ///< mean over KV heads of entries held, per layer
};

class Session {
 public:
  /// Throws snapkv::Error for a bad n_ctx (< 1), prefill_chunk < 1, or a press make_press() rejects.
  Session(std::shared_ptr<const Model> model, SessionOptions opt);
  ~Session();

  /// Appends `tokens` at positions n_past().. and runs them layer-major (all tokens through
  /// layer 0, in chunks of prefill_chunk, then layer 1, ...). If `compress` and the press is not
  /// "none", each full-attention layer is compressed right after its prefill when the prompt is
  /// longer than press_capacity() (one-shot: then n_past() must be 0 before the call, else
  /// snapkv::Error). Returns the last token's logits (n_vocab floats, valid until the next call).
  /// `all_logits` (optional) receives [tokens.size() x n_vocab]. progress(layers_done, n_layer).
  /// Throws snapkv::Error for an empty batch, a token id out of range, or a batch that does not
  /// fit the context ("prompt of N tokens does not fit the context of C tokens (-c)"). If an
  /// error is thrown after the cache was touched (e.g. by a press), the session is reset().
  std::span<const float> prefill(std::span<const int32_t> tokens, bool compress = true,
                                 std::vector<float>* all_logits = nullptr,
                                 const std::function<void(int, int)>& progress = {});
  /// Runs one token at position n_past(); returns its logits (valid until the next call).
  /// Throws snapkv::Error when the context is full or the id is out of range. Allocates nothing
  /// except when a cache head grows (every KVHeadCache::kGrowEntries tokens).
  std::span<const float> decode(int32_t token);

  int64_t n_past() const { return n_past_; }
  int64_t n_ctx() const { return n_ctx_; }
  const Model& model() const { return *model_; }
  const SessionOptions& options() const { return opt_; }
  const KVCache& kv_cache() const { return cache_; }
  const SessionStats& stats() const { return stats_; }
  /// What each press call kept (for --dump-kept), in layer order.
  const std::vector<KeptLayer>& kept() const { return kept_; }
  /// Empties the cache and the stats: a new request keeps no state.
  void reset();

 private:
  void run_layer(int il, const int32_t* pos, float* h, int64_t n, int64_t window, bool need_all_q);
  void compress_layer(int il, int compress_index, int n_compress_layers, int64_t n_tokens, int64_t capacity);
  void update_stats();
  void sample_peak();

  std::shared_ptr<const Model> model_;
  SessionOptions opt_;
  int64_t n_ctx_ = 0;
  int64_t n_past_ = 0;
  std::unique_ptr<Press> press_;
  KVCache cache_;
  std::unique_ptr<ForwardBuffers> buf_;  ///< activations of one chunk (decode uses its first row)
  std::unique_ptr<AttentionWorkspace> attn_ws_;
  std::vector<float> h_;         ///< prefill residual stream [n_tokens x n_embd]
  std::vector<int32_t> pos_;     ///< prefill positions [n_tokens]
  std::vector<float> h_dec_;     ///< decode residual [n_embd]
  std::vector<float> tmp_dec_;   ///< decode scratch [n_embd]
  std::vector<float> logits_;    ///< [n_vocab]
  std::vector<float> window_q_;  ///< [n_head][W][head_dim] (compression only)
  std::vector<float> all_q_;     ///< [n_head][L][head_dim] (presses that need all queries)
  SessionStats stats_;
  std::vector<KeptLayer> kept_;
};

}  // namespace snapkv
