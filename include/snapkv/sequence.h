// snapkv: a Sequence — the state of one request: its ragged per-(layer, KV head) KV cache, its
// positions, its press plan and pending layer-major prefill, its statistics and the log of what
// compression kept. Created by Engine::new_sequence; advanced by Engine::step. A sequence is
// used by one worker at a time (not thread-safe); different sequences are independent.
//
// Memory: an idle sequence holds its KV bytes (stats().kv_cache_bytes), 4 bytes of position per
// stored entry, and a constant of bookkeeping (constant_bytes()); nothing is sized by n_ctx.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "snapkv/cold_tier.h"
#include "snapkv/kv_type.h"
#include "snapkv/press_spec.h"

namespace snapkv {

class Engine;
class Workspace;
class KVCache;

/// Settings of a new sequence.
struct SequenceOptions {
  int64_t n_ctx = 0;  ///< positions the sequence may hold (tokens); 0 = the model's n_ctx_train
  /// Element type of the stored keys, and of the values unless kv_type_v is set.
  KVType kv_type = KVType::F16;
  /// Element type of the stored values when it differs from the keys' (llama.cpp's `-ctv`). Mixed
  /// types must both be quantized (kv_types_combine), e.g. q8_0 keys with q4_0 values: the values'
  /// 4-bit rounding costs far less quality than the keys' (docs/quality.md, "4-bit KV cache").
  /// new_sequence throws snapkv::Error for a combination kv_types_combine rejects.
  std::optional<KVType> kv_type_v;
  bool log_kept = false;  ///< record the kept positions and scores of every compressed layer (kept())
  /// Cold tier (issue 10): when a press compresses a layer, all its prompt entries are first
  /// copied to a cold store (int8 by default; RAM or a file), which PrefillOptions::reselect reads
  /// to bring evicted entries back for a new question. Costs stats().kv_cold_bytes, not counted
  /// in kv_cache_bytes. Off by default.
  ColdTierOptions cold_tier;
};

/// Settings of one prefill (Sequence::begin_prefill).
struct PrefillOptions {
  /// Compression applied to this prompt's KV cache, layer by layer as soon as each full-attention
  /// layer is done (SnapKV, Li et al. 2024, Sec. 4). "none" = no compression. Compression is
  /// one-shot: a compressing prefill needs an empty sequence. A prompt the press cannot or need
  /// not compress (no longer than the budget, or not longer than window + sinks) is kept whole,
  /// and stats() says why.
  PressSpec press;
  /// Keep the last `retain_window` queries of every full-attention layer ([n_head][W][head_dim]
  /// floats per layer) so that Sequence::compress() can compress this prompt later, e.g. on
  /// fork()s with different presses. 0 = keep none.
  int retain_window = 0;
  /// The prompt's question span: its last `question_tokens` tokens are the question (the last
  /// user turn and the chat template's closing tokens). 0 = unknown. A press with window=question
  /// makes these tokens its observation window, clamped to [window_min, window_max] (issue 11);
  /// other presses ignore it. Kept for a later Sequence::compress(). Must be in [0, tokens].
  int64_t question_tokens = 0;
  /// If set, receives the logits of every prompt token, [n_tokens x n_vocab] row-major, when the
  /// prefill finishes (the vector must outlive every step of a prefill advanced in slices).
  std::vector<float>* all_logits = nullptr;
  /// Re-selection for a follow-up question (issue 10; docs/follow-up.md): these
  /// tokens (the question, appended after what the sequence holds) are prefilled layer by layer,
  /// and at every layer the press compressed, before the question's rows attend, the layer's
  /// prompt entries are restored whole from the cold tier (hot rows exact, evicted rows from the
  /// cold copy); after the question's rows went through it, the last W question queries score
  /// every prompt position with SnapKV's scoring (window softmax, GQA reduction, pooling: the
  /// press's kernel / pool / gqa_agg) and each KV head keeps as many prompt positions as it held
  /// before (its top-scored ones; the press's sinks always), the others going back to cold.
  /// Everything after the prompt (earlier questions and answers, this question) stays hot.
  /// W = the press's window, or with window=question the question clamped to [window_min,
  /// window_max]; never more than the question's tokens. Needs a sequence with a cold tier holding a
  /// prefilled prompt and no press in these options (throws snapkv::Error otherwise); a prompt the
  /// press did not compress has nothing to re-select (the prefill is plain).
  bool reselect = false;
  /// Called after each layer: progress(layers_done, n_layer).
  std::function<void(int, int)> progress;
};

/// What a press kept in one layer: per KV head, the ascending positions and the score that
/// ranked each one (+inf for positions kept unconditionally: window, sinks).
struct KeptLayer {
  int layer = 0;
  std::vector<std::vector<int32_t>> positions;
  std::vector<std::vector<float>> scores;
};

struct SequenceStats {
  double prefill_ms = 0;           ///< wall time from the first to the last step of the prefills (compression included)
  double compression_ms = 0;       ///< time inside presses and compaction
  size_t kv_cache_bytes = 0;       ///< K+V payload bytes held now
  size_t peak_kv_cache_bytes = 0;  ///< max of kv_cache_bytes over the sequence's life (sampled after every block call)
  size_t kv_cache_bytes_full = 0;  ///< an uncompressed cache of the same tokens (sliding-window layers: what they hold)
  std::vector<double> kept_tokens_per_layer;  ///< per layer: mean over KV heads of the entries held
  std::string press = "none";                 ///< the press applied (canonical spec), "none" if none
  bool compressed = false;                    ///< a press removed entries
  int64_t budget = 0;            ///< capacity C (tokens per KV head) the press used; 0 if it did not compress
  std::string compression_note;  ///< why a requested press did not compress (prompt fits / too short), else ""
  int64_t n_prompt_tokens = 0;   ///< tokens of the compressed (or first) prompt
  int window = 0;                ///< observation window W the press used (tokens); 0 if it did not compress
  /// Bytes of the cold tier (RAM or file; SequenceOptions::cold_tier), 0 without. Forks share
  /// their parent's store, so each reports the same bytes: do not sum it over forks.
  size_t kv_cold_bytes = 0;
  int n_reselections = 0;   ///< prefills with PrefillOptions::reselect that re-selected
  double reselect_ms = 0;   ///< time in those re-selections: cold reads, scoring, rebuilding the hot cache
  int reselect_window = 0;  ///< W of the last re-selection (question tokens that scored)
};

class Sequence {
 public:
  ~Sequence();
  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;

  /// Positions held (tokens prefilled and decoded so far; the next token goes to position n_past()).
  int64_t n_past() const;
  /// Most positions this sequence may hold.
  int64_t n_ctx() const;
  /// Element type of the stored keys (SequenceOptions::kv_type) and values (kv_type_v, or kv_type).
  KVType kv_type() const;
  KVType kv_type_v() const;
  /// The cold tier's settings (SequenceOptions::cold_tier; a restored session's: load_session).
  const ColdTierOptions& cold_tier() const;
  const SequenceStats& stats() const;
  /// What each press call kept, in layer order (only with SequenceOptions::log_kept); each
  /// re-selection (PrefillOptions::reselect) appends its own records, layer by layer.
  const std::vector<KeptLayer>& kept() const;

  /// Queues a prefill of `tokens` at positions n_past().. (layer-major: all tokens through
  /// layer 0, then layer 1, ...); Engine::step advances it (Batch::add_prefill), Engine::prefill
  /// runs it to the end. Throws snapkv::Error, changing nothing, for: no tokens, an id outside
  /// the vocabulary, tokens that do not fit the context ("prompt of N tokens does not fit the
  /// context of C tokens (-c)"), a prefill already pending, a bad press spec, or a compressing
  /// press on a sequence that already holds tokens.
  void begin_prefill(std::span<const int32_t> tokens, const PrefillOptions& opt);
  /// True while a prefill is pending (begun and not finished).
  bool prefilling() const;
  /// Prefill work still to run, in token-layers (rows x layers, the unit of Batch::add_prefill's
  /// budget): prompt tokens x layers not yet run, minus the tokens already run of the current
  /// layer. 0 when no prefill is pending.
  int64_t prefill_rows_left() const;
  /// Logits of the last token of the last finished prefill (n_vocab floats). Empty before, and
  /// freed once the sequence decodes a token (they no longer describe its last position).
  std::span<const float> prefill_logits() const;

  /// A copy of this sequence (cache, positions, stats, kept log, retained queries; the cold tier
  /// is shared, not copied: it is immutable once compressed): costs a copy
  /// of its KV bytes. Throws snapkv::Error while a prefill is pending.
  std::unique_ptr<Sequence> fork() const;

  /// Compresses the held prompt now with `press`, every full-attention layer, exactly as if the
  /// press had been given to the prefill (the kept sets and the cache are identical). Needs the
  /// prefill's queries: PrefillOptions::retain_window >= the press's window, the sequence holding
  /// exactly that prompt (nothing decoded, nothing compressed). A press that keeps the whole
  /// prompt (it fits the budget) only records that in stats(); the sequence may be compressed
  /// later. Throws snapkv::Error otherwise or for a bad spec, changing nothing; if the press fails
  /// in the middle, the sequence is reset. Uses the workspace's threads. A compression frees the retained queries.
  void compress(const PressSpec& press, Workspace& ws);

  /// Empties the cache, positions, stats and pending prefill: the sequence can serve a new request.
  void reset();

  /// Bytes of bookkeeping a sequence holds besides its KV payload and positions: the object, one
  /// small record per layer and per (layer, KV head) and their heap blocks; plus, while held, the
  /// prefill logits (n_vocab x 4 B, until the first decoded token) and the retained window queries
  /// (until compress()). A compressed or decoding idle sequence holds only the records: about
  /// 10.7 KB for SmolLM2-135M (30 layers x 3 KV heads), 3.2 KB for Gemma 3 270M.
  size_t constant_bytes() const;

  /// Internal (src/kv/kv_cache.h): the cache, for tests and tools.
  const KVCache& kv_cache() const;

  struct State;  ///< internal (src/runtime/sequence_state.h)
  State& state() { return *s_; }
  const State& state() const { return *s_; }

 private:
  friend class Engine;
  explicit Sequence(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

}  // namespace snapkv
