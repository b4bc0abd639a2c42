// snapkv: a GGUF language model (architectures `llama` and `gemma3`): hyper-parameters, weights
// bound straight to the memory mapping (no up-front dequantization) and the transformer block.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "attention/attention.h"
#include "attention/decode.h"
#include "core/thread_context.h"
#include "gguf/gguf.h"
#include "kv/kv_cache.h"
#include "model/rope.h"
#include "quant/quant.h"
#include "snapkv/op_profile.h"

namespace snapkv {

enum class FfnActivation { SiLU, GeluTanh };

/// Hyper-parameters read from the GGUF metadata (keys `<arch>.*`).
struct ModelConfig {
  std::string arch;  ///< general.architecture
  std::string name;  ///< general.name ("" if absent)
  int n_layer = 0, n_embd = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_ff = 0, n_vocab = 0, n_rot = 0;
  int64_t n_ctx_train = 0;
  float rms_eps = 1e-5f;
  float rope_base = 10000.0f;      ///< full-attention layers
  float rope_base_swa = 10000.0f;  ///< sliding-window layers
  float rope_freq_scale = 1.0f;    ///< linear RoPE scaling of full-attention layers (1 / factor)
  float attn_scale = 1.0f;         ///< logit = attn_scale * dot(q, k)
  float embd_scale = 1.0f;         ///< token embeddings are multiplied by this
  RopeType rope_type = RopeType::Normal;
  FfnActivation ffn_act = FfnActivation::SiLU;
  int sliding_window = 0;             ///< 0 = none
  std::vector<uint8_t> layer_is_swa;  ///< per layer: 1 = sliding-window attention
  bool qk_norm = false;               ///< per-head RMSNorm of Q and K (attn_q_norm / attn_k_norm)
  bool post_norms = false;            ///< RMSNorm after attention and after the FFN (gemma)
  bool tied_output = false;           ///< output projection = token_embd

  /// Sliding window of layer il (0 = full attention).
  int layer_window(int il) const { return layer_is_swa.at(static_cast<size_t>(il)) ? sliding_window : 0; }
};

/// Weights of one transformer block. Norm weights are copied to f32; matrices are views into
/// the mapping. Absent optional tensors are empty.
struct LayerWeights {
  std::vector<float> attn_norm;           ///< [n_embd]
  WeightView wq, wk, wv, wo;              ///< [n_head*hd x n_embd], [n_kv*hd x n_embd] x2, [n_embd x n_head*hd]
  std::vector<float> q_norm, k_norm;      ///< [head_dim] (qk_norm)
  std::vector<float> post_attn_norm;      ///< [n_embd] (post_norms)
  std::vector<float> ffn_norm;            ///< [n_embd]
  WeightView ffn_gate, ffn_up, ffn_down;  ///< [n_ff x n_embd] x2, [n_embd x n_ff]
  std::vector<float> post_ffn_norm;       ///< [n_embd] (post_norms)
};

/// Activation buffers of the forward pass for up to `capacity` rows at a time (a prefill chunk
/// and/or decode rows of many sequences). Allocated once per Workspace.
struct ForwardBuffers {
  ForwardBuffers(const ModelConfig& c, int64_t capacity);
  int64_t capacity;
  std::vector<float> xn;     ///< [cap x n_embd] normed input / block output
  std::vector<float> q;      ///< [cap x n_head*head_dim] queries after Q-norm and RoPE (unscaled)
  std::vector<float> k, v;   ///< [cap x n_head_kv*head_dim]
  std::vector<float> attn;   ///< [cap x n_head*head_dim] attention output
  std::vector<float> ffn_a;  ///< [cap x n_ff]
  std::vector<float> ffn_b;  ///< [cap x n_ff]
};

/// Consecutive rows [row0, row0 + n) of a BlockBatch that belong to one sequence: their keys and
/// values are appended to `cache` (that sequence's cache of the layer being run, with room made
/// for n more entries per head: KVCache::make_room), and they attend over it. Positions of the
/// rows of one span ascend and follow the cache's last position.
struct BlockSpan {
  int64_t row0 = 0;
  int64_t n = 0;
  KVLayerCache* cache = nullptr;
};

/// One call of the transformer block on n rows of one or more sequences. The matmuls run over
/// all n rows together (each weight matrix is read once per call); attention runs per span.
struct BlockBatch {
  int64_t n = 0;                     ///< rows (<= buf->capacity)
  const int32_t* pos = nullptr;      ///< [n] absolute positions
  float* h = nullptr;                ///< [n x n_embd] residual stream, updated in place
  std::span<const BlockSpan> spans;  ///< cover rows 0..n-1 in order, no overlap
  ForwardBuffers* buf = nullptr;
  AttentionWorkspace* attn_ws = nullptr;            ///< spans of several rows (prefill kernel)
  DecodeWorkspace* decode_ws = nullptr;             ///< one-row spans, all in one split-K call
  std::vector<DecodeQuery>* decode_rows = nullptr;  ///< scratch list of those rows (reused, no allocation)
  ThreadContext* tc = nullptr;                      ///< threads and scratch of the calling worker
  StepProfile* profile = nullptr;  ///< where the operations' times go (Workspace::set_profiling); null: untimed
};

class Model {
 public:
  /// Maps the GGUF at `path`, reads the hyper-parameters and binds the weights. Throws
  /// snapkv::Error naming the file and the missing key / unsupported architecture / unsupported
  /// tensor type / wrong tensor shape.
  static std::shared_ptr<const Model> load(const std::string& path);

  virtual ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelConfig& config() const { return cfg_; }
  const GGUFFile& gguf() const { return gguf_; }
  /// Bytes of the bound weight tensors in the file.
  size_t weight_bytes() const { return weight_bytes_; }
  const LayerWeights& layer(int il) const { return layers_.at(static_cast<size_t>(il)); }
  const WeightView& token_embd() const { return tok_embd_; }
  const WeightView& output() const { return output_; }

  /// Attention settings of layer il (scale, window, heads).
  AttentionParams attention_params(int il) const;
  /// RoPE settings of layer il.
  RopeParams rope_params(int il) const;

  /// Embeddings of `tokens` (each in [0, n_vocab), else snapkv::Error) times embd_scale:
  /// out [n x n_embd].
  void embed(std::span<const int32_t> tokens, float* out) const;
  /// Final RMSNorm and output projection of n rows: h [n x n_embd] -> logits [n x n_vocab].
  /// `tmp` is scratch of n * n_embd floats. With a row-lane output matrix (see
  /// output_rowlane_bytes) calls of 1-7 rows use it; the values equal the token-lane kernels' of
  /// larger calls bit for bit, so a row's logits do not depend on how many rows share the call.
  void logits(const float* h, int64_t n, float* out, float* tmp, ThreadContext& tc) const;
  /// Bytes of the output matrix kept in row-lane layout (quant/kern_rowlane.h) for decode, 0 when
  /// not: made at load for a Q8_0 output matrix in AVX-512 VNNI builds unless SNAPKV_ROWLANE=0 or
  /// SNAPKV_TOKEN_LANES=0; the GGUF pages of that matrix are then dropped from memory.
  size_t output_rowlane_bytes() const { return output_rowlane_bytes_; }
  /// Runs block il on `b`: reads b.h, appends each span's keys/values (after K-norm and RoPE) to
  /// its cache (make_room must have been called), attends per span, and adds both residual
  /// branches to b.h. Afterwards b.buf->q holds the rows' queries (after Q-norm and RoPE,
  /// unscaled). Throws snapkv::Error for spans that do not cover the rows.
  void forward_layer(int il, BlockBatch& b) const;

 protected:
  explicit Model(GGUFFile&& f);
  /// Binds a matrix tensor of shape {cols, rows} (GGUF order); checks type support and shape.
  WeightView bind_matrix(const std::string& name, int64_t rows, int64_t cols, bool required = true);
  /// Copies a 1-D f32/f16/bf16 tensor of `n` elements.
  std::vector<float> bind_vector(const std::string& name, int64_t n, bool required = true);
  /// The architecture's block (called by forward_layer after the batch was checked).
  virtual void run_block(int il, BlockBatch& b) const = 0;
  /// Shared part of the block: attention (Q/K/V projections -> optional QK-norm -> RoPE -> cache
  /// append -> attention), leaving the attention output projected into b.buf->xn.
  void attention_block(int il, BlockBatch& b, const float* x_normed) const;
  /// After bind_weights: the row-lane copy of a Q8_0 output matrix (output_rowlane_bytes).
  void prepare_decode_layouts();

  GGUFFile gguf_;
  ModelConfig cfg_;
  std::vector<LayerWeights> layers_;
  WeightView tok_embd_, output_;
  std::vector<float> output_norm_;
  std::vector<float> rope_freqs_;  ///< optional rope_freqs.weight [n_rot/2]
  size_t weight_bytes_ = 0;
  std::unique_ptr<uint8_t[]> output_rowlane_;  ///< output_ in row-lane layout, or null
  size_t output_rowlane_bytes_ = 0;
};

}  // namespace snapkv
