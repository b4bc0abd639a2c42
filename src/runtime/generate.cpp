// snapkv runtime: generate() (see snapkv/generate.h).
#include "snapkv/generate.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "snapkv/batch.h"
#include "snapkv/engine.h"
#include "snapkv/error.h"
#include "snapkv/sequence.h"
#include "snapkv/stop_filter.h"
#include "snapkv/tokenizer.h"
#include "snapkv/workspace.h"

namespace snapkv {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

}  // namespace

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::EOS:
      return "eos";
    case StopReason::NPredict:
      return "n_predict";
    case StopReason::ContextFull:
      return "context_full";
    case StopReason::StopString:
      return "stop";
    case StopReason::Cancelled:
      return "cancelled";
  }
  return "unknown";
}

namespace {

/// Checks what generate() and generate_answer() check before any work: ids and stop strings.
void check_request(const Engine& engine, std::span<const int32_t> context, std::span<const int32_t> question,
                   const GenerateOptions& opt) {
  // Every id before any work: the question is prefilled after the context, and a bad id found
  // only then would leave the sequence holding the context. The tokenizer too: the answer is
  // text, and a model without one was found only after the prefill.
  if (!engine.has_tokenizer())
    throw Error(fmt::format("{}: the model has no tokenizer (tokenizer.ggml.model): generate needs one to stream text",
                            engine.info().path));
  const int32_t n_vocab = engine.info().n_vocab;
  const auto check_ids = [n_vocab](std::span<const int32_t> ids, const char* what) {
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] < 0 || ids[i] >= n_vocab)
        throw Error(
            fmt::format("token id {} at {} index {} is outside the vocabulary [0, {})", ids[i], what, i, n_vocab));
  };
  check_ids(context, "prompt");
  check_ids(question, "question");
  for (size_t i = 0; i < opt.stop.size(); ++i) {
    // The text is valid UTF-8; a needle that is not could match inside a character and cut it.
    std::string valid;
    append_valid_utf8(valid, opt.stop[i], /*hold_tail=*/false);
    if (valid != opt.stop[i]) throw Error(fmt::format("stop string {} is not valid UTF-8", i));
  }
}

/// Samples up to n_predict tokens after the prefill whose last logits are `logits` (t0: the
/// request's start, for ttft_ms).
void sample_answer(const Engine& engine, Sequence& seq, std::span<const float> logits, Sampler& sampler,
                   const GenerateOptions& opt, Workspace& ws, Clock::time_point t0, GenerateResult& res) {
  const Tokenizer& tok = engine.tokenizer();
  TokenStreamDecoder stream(tok);
  StopFilter filter(opt.stop);
  bool cancelled = false;
  // The final call (id -1) is made after a cancel too: it carries the text held back for tokens
  // already generated (and counted), as GenerateOptions::on_token promises; its return is ignored.
  auto emit = [&](int32_t id, const std::string& piece) {
    const std::string out = id >= 0 ? filter.push(piece) : filter.push(piece) + filter.rest();
    if (opt.on_token && !opt.on_token(id, out) && id >= 0) cancelled = true;
  };

  Batch batch;
  if (opt.n_predict > 0) {
    int32_t t = sampler.sample(logits);
    res.ttft_ms = ms_since(t0);
    for (int64_t i = 0; i < opt.n_predict; ++i) {
      if (!opt.ignore_eos && tok.is_eog(t)) {
        res.stop_reason = StopReason::EOS;
        break;
      }
      res.tokens.push_back(t);
      emit(t, stream.push(t));
      if (filter.stopped()) {
        res.stop_reason = StopReason::StopString;
        break;
      }
      if (cancelled) {
        res.stop_reason = StopReason::Cancelled;
        break;
      }
      if (i + 1 == opt.n_predict) break;
      if (seq.n_past() >= seq.n_ctx()) {
        res.stop_reason = StopReason::ContextFull;
        break;
      }
      const auto td = Clock::now();
      batch.clear();
      batch.add(seq, t, true);
      engine.step(batch, ws);
      t = sampler.sample(batch.logits(0));
      res.decode_ms += ms_since(td);
      ++res.n_decode_steps;
    }
  }
  if (!filter.stopped()) {
    emit(-1, stream.flush());
    // The flush may complete a stop string (U+FFFD of an incomplete character); a cancel stays a cancel.
    if (filter.stopped() && !cancelled) res.stop_reason = StopReason::StopString;
  } else if (opt.on_token) {
    opt.on_token(-1, filter.rest());
  }
  res.text = filter.text();
  res.decode_tokens_per_s = res.decode_ms > 0 ? static_cast<double>(res.n_decode_steps) * 1000.0 / res.decode_ms : 0.0;
}

}  // namespace

GenerateResult generate(const Engine& engine, Sequence& seq, std::span<const int32_t> context,
                        std::span<const int32_t> question, const GenerateOptions& opt, Workspace& ws) {
  if (opt.n_predict < 0) throw Error(fmt::format("-n must be >= 0, got {}", opt.n_predict));
  if (context.empty()) throw Error("the prompt tokenized to zero tokens");
  if (seq.n_past() != 0 || seq.prefilling()) throw Error("generate: the sequence must be empty (reset() it first)");
  const int64_t n_prompt = static_cast<int64_t>(context.size() + question.size());
  if (n_prompt > seq.n_ctx())
    throw Error(fmt::format("prompt of {} tokens does not fit the context of {} tokens (-c)", n_prompt, seq.n_ctx()));
  Sampler sampler(opt.sampling);  // checks the settings before any work
  check_request(engine, context, question, opt);

  GenerateResult res;
  res.n_context_tokens = static_cast<int64_t>(context.size());
  res.n_question_tokens = static_cast<int64_t>(question.size());

  // Prefill: the context (compressed at the end of each full-attention layer), then the
  // question, if any, appended to the compressed cache.
  const auto t0 = Clock::now();
  PrefillOptions po;
  po.press = opt.press;
  po.question_tokens = opt.question_tokens;
  po.progress = opt.on_prefill_progress;
  std::span<const float> logits = engine.prefill(seq, context, po, ws);
  if (!question.empty()) {
    PrefillOptions pq;
    pq.progress = opt.on_prefill_progress;
    logits = engine.prefill(seq, question, pq, ws);
  }
  res.prefill_ms = ms_since(t0);
  res.prefill_tokens_per_s = res.prefill_ms > 0 ? static_cast<double>(n_prompt) * 1000.0 / res.prefill_ms : 0.0;
  sample_answer(engine, seq, logits, sampler, opt, ws, t0, res);
  return res;
}

GenerateResult generate_answer(const Engine& engine, Sequence& seq, std::span<const int32_t> question,
                               const GenerateOptions& opt, Workspace& ws) {
  if (opt.n_predict < 0) throw Error(fmt::format("-n must be >= 0, got {}", opt.n_predict));
  if (question.empty()) throw Error("the question tokenized to zero tokens");
  if (seq.n_past() == 0 || seq.prefilling())
    throw Error("generate_answer: the sequence must hold a prefilled document");
  if (seq.n_past() + static_cast<int64_t>(question.size()) > seq.n_ctx())
    throw Error(fmt::format("{} question tokens after {} do not fit the context of {} tokens (-c)", question.size(),
                            seq.n_past(), seq.n_ctx()));
  Sampler sampler(opt.sampling);
  check_request(engine, {}, question, opt);
  GenerateResult res;
  res.n_question_tokens = static_cast<int64_t>(question.size());
  const double reselect_before = seq.stats().reselect_ms;
  const auto t0 = Clock::now();
  PrefillOptions pq;
  pq.progress = opt.on_prefill_progress;
  pq.reselect = opt.reselect;
  std::span<const float> logits = engine.prefill(seq, question, pq, ws);
  res.prefill_ms = ms_since(t0);
  res.reselect_ms = seq.stats().reselect_ms - reselect_before;
  res.prefill_tokens_per_s = res.prefill_ms > 0 ? static_cast<double>(question.size()) * 1000.0 / res.prefill_ms : 0.0;
  sample_answer(engine, seq, logits, sampler, opt, ws, t0, res);
  return res;
}

}  // namespace snapkv
