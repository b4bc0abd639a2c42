// snapkv: the Engine — a loaded model and its tokenizer, immutable after load and shared by
// every sequence and worker (llama.cpp's llama_model, gemma.cpp's Gemma). What belongs to one
// request lives in a Sequence (sequence.h); what belongs to one worker in a Workspace
// (workspace.h); one step of the forward pass over many sequences is described by a Batch
// (batch.h) and run by Engine::step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "snapkv/chat.h"
#include "snapkv/chat_template.h"
#include "snapkv/kv_type.h"
#include "snapkv/prefill_attention.h"
#include "snapkv/tokenizer.h"

namespace snapkv {

class Model;
class Sequence;
class Batch;
class Workspace;
struct SequenceOptions;
struct PrefillOptions;

/// Settings of Engine::load.
struct EngineOptions {
  /// Threads of the workspaces made without an explicit count (WorkspaceOptions::n_threads = 0).
  /// 0 = every core this process may use: its affinity mask (omp_get_num_procs), capped by its
  /// cgroup's CPU limit rounded up (a container's `--cpus`). The engine itself starts no threads.
  int n_threads = 0;
  /// Arithmetic of prefill attention (calls with two or more queries) in the workspaces made for
  /// this engine without their own (WorkspaceOptions::prefill_attention): Exact (f32, the default),
  /// BF16 (bfloat16 products, f32 sums; needs prefill_attention_supported(BF16); heads whose
  /// head_dim is not a multiple of 32 run Exact) or Int8 (int8 products; needs AVX2; head_dim a
  /// multiple of 32 up to 512, else Exact). Decode is always Exact. See prefill_attention.h.
  PrefillAttention prefill_attention = PrefillAttention::Exact;
};

/// What a user needs to know about the loaded model (read from the GGUF).
struct ModelInfo {
  std::string path;               ///< the GGUF file
  std::string arch;               ///< general.architecture ("llama", "gemma3")
  std::string name;               ///< general.name ("" if absent)
  int n_layer = 0;                ///< transformer blocks
  int n_embd = 0;                 ///< hidden size
  int n_head = 0;                 ///< query heads
  int n_head_kv = 0;              ///< KV heads (GQA: n_head / n_head_kv query heads share one)
  int head_dim = 0;               ///< elements per head
  int n_vocab = 0;                ///< tokens
  int64_t n_ctx_train = 0;        ///< context length the model was trained with (tokens)
  size_t weight_bytes = 0;        ///< bytes of the weight tensors (memory-mapped, shared by all sequences)
  std::vector<int> layer_window;  ///< per layer: sliding window in tokens, 0 = full attention (compressed by presses)
  /// Entries a sliding-window layer may hold beyond window - 1 while decoding before it drops the
  /// oldest (they count in the KV bytes held; memory planners must reserve them).
  int64_t window_slack = 0;

  /// Bytes one token occupies in an uncompressed KV cache of element type `t`, over all layers:
  /// n_layer x n_head_kv x 2 (K and V) x kv_row_bytes(t, head_dim) (head_dim x element size; Q8_0:
  /// head_dim / 32 x 34; Q4_0: x 18). Throws snapkv::Error when t cannot store rows of head_dim (Q8_0 /
  /// Q4_0, head_dim % 32 != 0).
  size_t kv_bytes_per_token(KVType t) const;
  /// The same with keys of type `k` and values of type `v`: n_layer x n_head_kv x
  /// kv_entry_bytes(k, v, head_dim). Throws snapkv::Error as kv_row_bytes does; a pair that
  /// kv_types_combine rejects (no cache holds it) gets the size its rows would have.
  size_t kv_bytes_per_token(KVType k, KVType v) const;
};

class Engine {
 public:
  /// Maps the GGUF at `path`, binds the weights and loads the tokenizer (when the file has
  /// `tokenizer.ggml.model`). Throws snapkv::Error naming the file and what is wrong (missing
  /// file, bad GGUF, unsupported architecture, tensor type or shape, malformed tokenizer keys),
  /// a bad thread count (< 0 or > 4096) or a prefill_attention this build does not run
  /// (!prefill_attention_supported: BF16 without AVX512-BF16, Int8 without AVX2).
  static std::shared_ptr<const Engine> load(const std::string& path, const EngineOptions& opt = {});
  /// An engine over a model already loaded (internal type, src/model/model.h; for tools and
  /// tests that build models themselves). Loads the tokenizer from the model's GGUF. Same errors.
  static std::shared_ptr<const Engine> from_model(std::shared_ptr<const Model> model, const EngineOptions& opt = {});
  /// The checks load() and from_model() make of `opt` before any file is read: throws
  /// snapkv::Error for a bad thread count or a prefill_attention this build or CPU does not run.
  /// For callers that must refuse such options before they do anything else (`snapkv serve`
  /// checks them before it binds its port).
  static void check_options(const EngineOptions& opt);

  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const ModelInfo& info() const { return info_; }
  /// The model's tokenizer. Throws snapkv::Error if the GGUF has none (has_tokenizer()).
  const Tokenizer& tokenizer() const;
  /// False for a GGUF without tokenizer keys (token ids only: step/prefill work, generate does not).
  bool has_tokenizer() const { return tokenizer_ != nullptr; }
  /// Threads of a workspace made with WorkspaceOptions::n_threads = 0 (resolved: >= 1).
  int n_threads() const { return n_threads_; }
  /// Prefill attention arithmetic of a workspace made without its own (EngineOptions::prefill_attention).
  PrefillAttention prefill_attention() const { return prefill_attention_; }
  /// The chat format of the model (tokenizer.chat_template, else the architecture). Throws
  /// snapkv::Error when the model has none (base model).
  ChatFormat chat_format() const;
  /// The model's chat template (ChatTemplate::from_gguf): tokenizer.chat_template, or a
  /// built-in one with warning() set when the model has none or it cannot be parsed; bos_token
  /// and eos_token set from the tokenizer. Throws snapkv::Error for a base model.
  ChatTemplate chat_template() const;

  /// A new, empty sequence of this engine's model (see SequenceOptions). Throws snapkv::Error
  /// for bad options.
  std::unique_ptr<Sequence> new_sequence(const SequenceOptions& opt) const;

  /// Runs one step of the forward pass: every decode row of `batch` through every layer (the
  /// matmuls of a layer run over all rows of all sequences together, each weight matrix read
  /// once per call; attention runs per row against its own sequence's ragged cache), and every
  /// prefill item advanced layer-major by up to its row budget, its chunks joining the decode
  /// rows' matmuls at the layer it is in. Results are in `batch` (logits) and the sequences
  /// (caches, positions, stats). `ws` must have been made for this engine; it is the only
  /// mutable state besides the batch's sequences, so workers with their own workspace may step
  /// disjoint batches concurrently.
  /// Throws snapkv::Error, before anything changes, for: an empty batch, a token id out of
  /// range, a sequence of another model, a decode row of a sequence that is prefilling or whose
  /// context is full, rows of one sequence that are not consecutive, a sequence that is both
  /// decoded and prefilled, more rows than the workspace holds. If an error happens after
  /// computation started (out of memory), every decode row's sequence is taken back to where it
  /// stood before the step (its entries of this step dropped), every prefill item's sequence is
  /// reset (emptied), and the error rethrown: no sequence is left half-updated. A snapkv::Error
  /// at the end of one prefill item's layer (its press, its cold tier's file: a full disk, or one
  /// thrown by its PrefillOptions::progress callback) fails that item alone: its sequence is
  /// reset, Batch::prefill_error says why, and the other rows and items go on.
  void step(Batch& batch, Workspace& ws) const;

  /// Convenience: Sequence::begin_prefill(tokens, opt) then steps until the prefill is done.
  /// Returns the last token's logits (n_vocab floats, valid until the sequence's next step).
  /// A failure after the computation started (see step(): its press, its cold tier's file, out of
  /// memory) is rethrown as thrown, and the sequence is then empty, whatever it held before.
  std::span<const float> prefill(Sequence& seq, std::span<const int32_t> tokens, const PrefillOptions& opt,
                                 Workspace& ws) const;

  /// SHA-256 of the model's GGUF image (lower-case hex): the model's identity in saved sessions
  /// (session.h). Computed from the mapped file on the first call (reads every byte: ~0.1-0.3 s
  /// per 100 MB) and cached; thread-safe.
  const std::string& model_sha256() const;

  /// The model (internal type: src/model/model.h).
  const Model& model() const { return *model_; }
  const std::shared_ptr<const Model>& model_ptr() const { return model_; }

 private:
  Engine() = default;
  std::shared_ptr<const Model> model_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  ModelInfo info_;
  int n_threads_ = 1;
  PrefillAttention prefill_attention_ = PrefillAttention::Exact;
  mutable std::once_flag sha256_once_;
  mutable std::string sha256_;
};

}  // namespace snapkv
