// snapkv: generate() — one request from prompt to text: prefill (the context compressed by a
// press, then optionally a question appended uncompressed: the query-agnostic protocol),
// sampling, stop on end-of-generation tokens / n_predict / stop strings / a full context,
// streaming with UTF-8-safe detokenisation, and timings.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "snapkv/press_spec.h"
#include "snapkv/sampling.h"

namespace snapkv {

class Engine;
class Sequence;
class Workspace;

/// Why generation ended.
enum class StopReason {
  EOS,          ///< the model produced an end-of-generation token (not part of the output)
  NPredict,     ///< n_predict tokens were generated
  ContextFull,  ///< the sequence's context is full
  StopString,   ///< the text reached one of GenerateOptions::stop (cut before it)
  Cancelled,    ///< the streaming callback returned false
};

/// "eos", "n_predict", "context_full", "stop", "cancelled".
const char* stop_reason_name(StopReason r);

struct GenerateOptions {
  int64_t n_predict = 128;  ///< most tokens to generate (>= 0)
  SamplerOptions sampling;  ///< temperature, top-k, top-p, seed
  bool ignore_eos = false;  ///< do not stop at end-of-generation tokens
  /// Stop strings (valid UTF-8; empty ones are ignored): generation ends as soon as the text
  /// contains one (of the matches completed by the same token, the earliest); the text is cut
  /// before it. Text that might begin a stop string is held back from the stream until it is
  /// decided.
  std::vector<std::string> stop;
  PressSpec press;  ///< compression of the context's KV cache ("none": full cache)
  /// The last question_tokens tokens of `context` are its question span (the observation window
  /// of window=question presses, PrefillOptions::question_tokens); 0 = unknown.
  int64_t question_tokens = 0;
  /// Streaming: called for every generated token with the text it completes (valid UTF-8,
  /// possibly empty), and once at the end with token -1 and the held-back rest. Return false
  /// to stop (StopReason::Cancelled).
  std::function<bool(int32_t token, std::string_view text)> on_token;
  /// Prefill progress: (layers_done, n_layer), per prefill.
  std::function<void(int, int)> on_prefill_progress;
  /// generate_answer() only: the question re-selects the document's hot entries from the
  /// sequence's cold tier (PrefillOptions::reselect; needs SequenceOptions::cold_tier).
  bool reselect = false;
};

struct GenerateResult {
  std::vector<int32_t> tokens;  ///< generated ids (an end-of-generation token is not included)
  std::string text;             ///< their text (cut before a stop string)
  StopReason stop_reason = StopReason::NPredict;
  int64_t n_context_tokens = 0;
  int64_t n_question_tokens = 0;
  double ttft_ms = 0;               ///< from the start to the first sampled token (prefill included)
  double prefill_ms = 0;            ///< context + question prefill (compression included)
  double prefill_tokens_per_s = 0;  ///< (context + question tokens) / prefill time
  double decode_ms = 0;             ///< time of the decode steps (each: forward + sampling)
  int64_t n_decode_steps = 0;
  double decode_tokens_per_s = 0;  ///< n_decode_steps / decode time
  double reselect_ms = 0;          ///< generate_answer with reselect: time re-selecting (inside prefill_ms)
};

/// Runs one request on `seq` (which must be empty): prefills `context` with options.press, then
/// `question` (if not empty) uncompressed after it, then samples up to n_predict tokens.
/// Throws snapkv::Error for bad options (n_predict < 0, empty context, sampler settings, a stop
/// string that is not valid UTF-8), a prompt that does not fit the sequence's context, or
/// anything Engine::step rejects.
GenerateResult generate(const Engine& engine, Sequence& seq, std::span<const int32_t> context,
                        std::span<const int32_t> question, const GenerateOptions& opt, Workspace& ws);

/// A follow-up question (issue 10): `seq` already holds a prefilled (usually compressed) document;
/// prefills `question` after it — re-selecting the hot entries from the cold tier when
/// opt.reselect — then samples as generate() does (opt.press and question_tokens are not used).
/// To ask several questions of one document, answer each on a fork() of it. n_context_tokens is
/// 0 in the result; ttft_ms and prefill_ms count from the question's prefill. Throws snapkv::Error
/// as generate() does, and for an empty question or a sequence that holds nothing.
GenerateResult generate_answer(const Engine& engine, Sequence& seq, std::span<const int32_t> question,
                               const GenerateOptions& opt, Workspace& ws);

}  // namespace snapkv
