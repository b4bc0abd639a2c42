// snapkv eval: runs one sample against a list of presses under one protocol. The sample's
// prompt is prefilled once with the full cache (keeping its window queries); each press is
// applied to a fork of it (Sequence::fork + Sequence::compress), so P presses cost one prefill
// plus P compressions and decodes (docs/design.md, "Eval").
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "eval/fidelity.h"
#include "eval/tasks.h"
#include "snapkv/cold_tier.h"
#include "snapkv/kv_type.h"
#include "snapkv/press_spec.h"

namespace snapkv {
class Engine;
class Workspace;
}  // namespace snapkv

namespace snapkv::eval {

/// Aware: question in the compressed prompt. Agnostic: context compressed alone, then the
/// question. Multi: the context compressed once, each question from a copy of it. Reselect: as
/// Multi with a cold tier, each question re-selecting the hot entries (issue 10). Followup: the
/// context compressed with question 0 (query-aware to it, as one request would be), question 0
/// answered, and each later question asked from a copy after question 0's expected answer, as a
/// follow-up turn (Question::follow_up): plain SnapKV on a conversation (issue 10's baseline).
enum class Protocol { Aware, Agnostic, Multi, Continuation, Reselect, Followup };

/// "aware", "agnostic", "multi", "continuation", "reselect", "followup"; parse_protocol throws
/// snapkv::Error otherwise.
const char* protocol_name(Protocol p);
Protocol parse_protocol(const std::string& s);
/// Whether `p` asks every question of a sample (multi, reselect, followup), not only question 0.
bool multi_question(Protocol p);

/// A press as the runner uses it: the spec given, its canonical form (every key with its value)
/// and what the report shows.
struct PressRun {
  PressSpec spec;
  std::string canonical;           ///< Press::spec().to_string(), e.g. snapkv:ratio=0.5,window=32,...
  std::string name;                ///< snapkv, none, ...
  std::optional<double> ratio;     ///< the spec's ratio, if any
  std::optional<int64_t> budget;   ///< the spec's budget, if any (or the default 1024 without ratio)
  int window = 0;                  ///< observation window, the largest for window=question (0 for none)
  bool needs_all_queries = false;  ///< h2o: cannot be applied to a fork afterwards
};

/// Validates `text` (throws snapkv::Error naming the problem) and resolves it.
PressRun resolve_press(const std::string& text);

/// One result: a (sample, press, protocol, question).
struct Record {
  std::string sample_id, task;
  int64_t length = 0;
  int index = 0;
  uint64_t seed = 0;
  double depth = -1, depth_actual = -1;
  std::string press, press_name;
  std::optional<double> ratio;
  std::optional<int64_t> budget;
  Protocol protocol = Protocol::Aware;
  int question = 0;
  int64_t n_prompt_tokens = 0, n_context_tokens = 0;
  std::string answer;
  std::vector<std::string> expected;
  double score = 0;
  std::vector<int32_t> tokens;                         ///< generated ids (not written to the JSONL)
  size_t kv_cache_bytes = 0, kv_cache_bytes_full = 0;  ///< after compression, before the question
  bool compressed = false, forked = false;
  std::string compression_note;
  int64_t kept_budget = 0;  ///< capacity C the press used (0 when it kept everything)
  int window = 0;           ///< observation window W the press used (SequenceStats::window; 0 when it kept everything)
  double prefill_ms = 0, compress_ms = 0, question_ms = 0, decode_ms = 0;
  double reselect_ms = 0;    ///< re-selection in the question's prefill (reselect protocol), ms
  size_t kv_cold_bytes = 0;  ///< the cold tier's bytes (reselect protocol), else 0
  int decode_rows = 0;       ///< rows of the decode steps this record was decoded in
  int64_t n_generated = 0;
  std::string stop;  ///< eos, n_predict, context_full
  bool has_fidelity = false;
  FidelityStats fidelity;

  /// The key --resume matches on: sample_id, press (canonical), protocol, question.
  std::string key() const;
  nlohmann::ordered_json to_json() const;
};

/// The resume key of a JSONL record (the fields key() uses). Throws nlohmann's error for a record
/// without them.
std::string record_key(const nlohmann::json& j);

struct RunnerOptions {
  /// Each press on its own fresh sequence (the press in the prefill), decoded alone: the
  /// reference the fork-based runner must equal (tests), and what `snapkv run` does.
  bool independent = false;
  /// Rows of one decode step (< 8: the per-row kernels, bit-identical to decoding alone).
  int max_decode_rows = 7;
  KVType kv_type = KVType::F16;
  std::optional<KVType> kv_type_v;  ///< the values' type when not kv_type (SequenceOptions::kv_type_v)
  /// Fidelity: the reference full cache's element type, keys and values alike (nullopt: the
  /// cache's own kv_type / kv_type_v, a fork of the same prefill).
  /// The reference's prefill attention is always Exact: with a workspace that is not (BF16, Int8), the
  /// reference is prefilled on its own in an exact workspace.
  std::optional<KVType> reference_kv_type;
  int gen_tokens = 0;       ///< override the task's generation length (0: the task's)
  int fidelity_chunk = 64;  ///< continuation tokens per prefill call (logits held: chunk x n_vocab)
  /// The cold tier of the reselect protocol (int8 unless set).
  ColdTierOptions cold_tier = {.enabled = true, .format = ColdFormat::Int8, .dir = {}};
};

class Runner {
 public:
  /// Keeps references to the engine and workspace.
  Runner(const Engine& engine, Workspace& ws, RunnerOptions opt = {});

  /// Results of `presses` on `s` under `p` (Continuation for fidelity samples, which take no
  /// other protocol): one record per press (multi: per press and question), in press order.
  /// `skip(press_index, question)` may drop work already done (--resume). Throws snapkv::Error
  /// for a protocol that does not fit the sample.
  std::vector<Record> run(const Sample& s, const std::vector<PressRun>& presses, Protocol p,
                          const std::function<bool(size_t, int)>& skip = {});

  /// Prefill time of the last run()'s shared prefills (ms) and how many there were.
  double last_prefill_ms() const { return last_prefill_ms_; }

 private:
  const Engine* engine_;
  Workspace* ws_;
  RunnerOptions opt_;
  double last_prefill_ms_ = 0;

  std::vector<Record> run_generate(const Sample& s, const std::vector<PressRun>& presses, Protocol p,
                                   const std::function<bool(size_t, int)>& skip);
  std::vector<Record> run_fidelity(const Sample& s, const std::vector<PressRun>& presses,
                                   const std::function<bool(size_t, int)>& skip);
};

}  // namespace snapkv::eval
