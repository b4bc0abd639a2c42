// snapkv runtime: the state behind a Sequence, and its pending layer-major prefill.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "kv/cold_store.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "runtime/press_plan.h"
#include "snapkv/sequence.h"

namespace snapkv {

/// A prefill in progress: the prompt's residual stream advances one layer at a time (all its
/// tokens through layer l, in chunks, before layer l + 1), so that each full-attention layer can
/// be compressed as soon as it is done and the peak KV memory stays at one full layer plus the
/// compressed ones (SnapKV, Li et al. 2024, Sec. 4).
struct PrefillJob {
  int64_t n = 0;                ///< prompt tokens
  std::vector<float> h;         ///< [n x n_embd] residual stream after layers 0..layer-1
  std::vector<int32_t> pos;     ///< [n] positions (n_past at begin + i)
  int layer = 0;                ///< layer being run
  int64_t done = 0;             ///< tokens of `layer` already run
  PressPlan plan;               ///< the press and whether it compresses this prompt
  int64_t window = 0;           ///< W window queries collected per full-attention layer (0: none)
  std::vector<float> window_q;  ///< [n_head][W][head_dim] queries of positions n-W..n-1 of `layer`
  std::vector<float> all_q;     ///< [n_head][n][head_dim] (presses that need every query)
  int compress_index = 0;       ///< index of `layer` among the full-attention layers
  int n_compress_layers = 0;
  int retain_window = 0;
  int64_t question_tokens = 0;         ///< PrefillOptions::question_tokens
  bool press_on = false;               ///< a press other than "none" was asked for (its plan goes to the stats)
  bool reselect = false;               ///< PrefillOptions::reselect on a sequence whose cold tier holds layers
  std::vector<int64_t> reselect_keep;  ///< per KV head: prompt entries held before restore_layer(layer)
  /// A compressing prefill's cold store (SequenceOptions::cold_tier), made with its file by
  /// begin_prefill before anything changes; the sequence takes it when the job starts.
  std::shared_ptr<ColdStore> cold;
  std::vector<float>* all_logits = nullptr;
  std::function<void(int, int)> progress;
  bool started = false;
  std::chrono::steady_clock::time_point t_start;
};

struct Sequence::State {
  std::shared_ptr<const Model> model;
  SequenceOptions opt;
  int64_t n_ctx = 0;
  KVCache cache;
  int64_t n_past = 0;
  SequenceStats stats;
  std::vector<KeptLayer> kept;
  std::unique_ptr<PrefillJob> job;
  std::vector<float> last_logits;  ///< [n_vocab] of the last finished prefill
  bool compressed_once = false;    ///< a compressing prefill or compress() ran (one-shot)
  /// Retained window queries per layer ([n_head][retained_w][head_dim], empty for SWA layers)
  /// of the prompt of retained_n tokens, for Sequence::compress().
  int retained_w = 0;
  int64_t retained_n = 0;
  int64_t retained_question = 0;  ///< PrefillOptions::question_tokens of that prompt
  std::vector<std::vector<float>> retained_q;
  uint64_t step_mark = 0;  ///< id of the last step that saw this sequence (duplicate check)
  /// The cold tier (issue 10): the compressed layers' prompt entries. Written only while this
  /// sequence compresses (one-shot), then read only: forks share it.
  std::shared_ptr<ColdStore> cold;

  State(std::shared_ptr<const Model> m, const SequenceOptions& o, int64_t ctx);

  /// Updates kv_cache_bytes and its peak.
  void sample_peak();
  /// Recomputes every byte statistic and the kept-per-layer means.
  void update_stats();
  /// What a press sees of layer il, whose heads must each hold n_tokens entries (entry i has
  /// position i): keys/values views, shapes, the window queries [n_head][window][hd]. Throws
  /// snapkv::Error naming the layer otherwise.
  PressInput layer_input(int il, int64_t n_tokens, int window, const float* window_q, int n_threads) const;
  /// Compresses layer il (full attention, holding exactly the n_tokens prompt entries) with the
  /// plan's press, given the window queries [n_head][W][hd] and (if needed) all queries.
  void compress_layer(int il, const PressPlan& plan, int compress_index, int n_compress_layers, int64_t n_tokens,
                      const float* window_q, const float* all_q, int n_threads);
  /// Re-selection (reselect.cpp): before a reselect job's rows enter full layer il, rebuild its
  /// prompt entries whole (hot rows as they are, the others from the cold store) and note per
  /// head how many it held in job->reselect_keep.
  void restore_layer(int il);
  /// After the reselect job's rows went through layer il: score the prompt entries with the last
  /// job->window question queries (window_q, [n_head][W][hd]) and keep per head its
  /// reselect_keep top prompt positions plus everything after the prompt.
  void reselect_layer(int il, const float* window_q, int n_threads);
  /// First step of the pending job: records its press plan and prompt in the statistics and
  /// sets up the retained queries (begin_prefill changes nothing but `job`).
  void start_job();
  /// Empties everything (a failed step leaves no half-updated sequence).
  void clear();
  /// Takes back a failed decode step: n_past = `n_past_before` and every entry at a position
  /// >= it dropped (the step appended only those; entries a sliding-window layer dropped to make
  /// room were outside every later window).
  void roll_back_decode(int64_t n_past_before);
};

}  // namespace snapkv
