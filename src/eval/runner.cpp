#include "eval/runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>

#include "eval/score.h"
#include "kv/presses/press.h"
#include "runtime/press_plan.h"
#include "snapkv/snapkv.h"

namespace snapkv::eval {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

/// A press applied at prefill, not to a fork (independent mode, or a press that scores with every
/// prompt query): a fresh sequence prefilled with it; `r` gets the prefill and compression times.
std::unique_ptr<Sequence> prefill_alone(const Engine& e, const SequenceOptions& so, std::span<const int32_t> tokens,
                                        int64_t question_tokens, const PressSpec& press, Workspace& ws, Record& r) {
  auto seq = e.new_sequence(so);
  PrefillOptions po;
  po.press = press;
  po.question_tokens = question_tokens;
  const auto t0 = Clock::now();
  e.prefill(*seq, tokens, po, ws);
  r.prefill_ms = ms_since(t0);
  r.compress_ms = seq->stats().compression_ms;
  r.forked = false;
  return seq;
}

}  // namespace

const char* protocol_name(Protocol p) {
  switch (p) {
    case Protocol::Aware:
      return "aware";
    case Protocol::Agnostic:
      return "agnostic";
    case Protocol::Multi:
      return "multi";
    case Protocol::Continuation:
      return "continuation";
    case Protocol::Reselect:
      return "reselect";
    case Protocol::Followup:
      return "followup";
  }
  return "?";
}

Protocol parse_protocol(const std::string& s) {
  for (Protocol p : {Protocol::Aware, Protocol::Agnostic, Protocol::Multi, Protocol::Continuation, Protocol::Reselect,
                     Protocol::Followup})
    if (s == protocol_name(p)) return p;
  throw Error(fmt::format("unknown protocol '{}' (aware, agnostic, multi, reselect, followup)", s));
}

bool multi_question(Protocol p) { return p == Protocol::Multi || p == Protocol::Reselect || p == Protocol::Followup; }

PressRun resolve_press(const std::string& text) {
  PressRun r;
  r.spec = PressSpec::parse(text);
  validate_press_spec(r.spec);
  r.canonical = make_press(r.spec)->spec().to_string();
  r.name = r.spec.name;
  if (r.name == "none") return r;
  const PressSpec canon = PressSpec::parse(r.canonical);
  if (auto v = canon.get("ratio")) r.ratio = std::stod(*v);
  if (auto v = canon.get("budget")) r.budget = std::stoll(*v);
  const auto press = make_press(r.spec);
  r.window = press->window();
  r.needs_all_queries = press->needs_all_queries();
  return r;
}

std::string Record::key() const {
  return fmt::format("{}\t{}\t{}\t{}", sample_id, press, protocol_name(protocol), question);
}

std::string record_key(const nlohmann::json& j) {
  return fmt::format("{}\t{}\t{}\t{}", j.at("sample_id").get<std::string>(), j.at("press").get<std::string>(),
                     j.at("protocol").get<std::string>(), j.at("question").get<int>());
}

nlohmann::ordered_json Record::to_json() const {
  using J = nlohmann::ordered_json;
  auto opt = [](const auto& o) { return o ? J(*o) : J(nullptr); };
  J j;
  j["sample_id"] = sample_id;
  j["task"] = task;
  j["length"] = length;
  j["index"] = index;
  j["seed"] = seed;
  j["depth"] = depth >= 0 ? J(depth) : J(nullptr);
  j["depth_actual"] = depth_actual >= 0 ? J(depth_actual) : J(nullptr);
  j["press"] = press;
  j["press_name"] = press_name;
  j["ratio"] = opt(ratio);
  j["budget"] = opt(budget);
  j["protocol"] = protocol_name(protocol);
  j["question"] = question;
  j["n_prompt_tokens"] = n_prompt_tokens;
  j["n_context_tokens"] = n_context_tokens;
  if (!has_fidelity) {
    j["answer"] = answer;
    j["expected"] = expected;
    j["score"] = score;
  } else {
    j["answer"] = nullptr;
    j["expected"] = nullptr;
    j["score"] = nullptr;
  }
  j["kv_cache_bytes"] = kv_cache_bytes;
  j["kv_cache_bytes_full"] = kv_cache_bytes_full;
  j["kept_fraction"] =
      kv_cache_bytes_full > 0 ? static_cast<double>(kv_cache_bytes) / static_cast<double>(kv_cache_bytes_full) : 1.0;
  j["compressed"] = compressed;
  j["kept_budget"] = kept_budget;
  j["window"] = window;
  j["compression_note"] = compression_note;
  j["forked"] = forked;
  j["prefill_ms"] = prefill_ms;
  j["compress_ms"] = compress_ms;
  j["question_ms"] = question_ms;
  j["decode_ms"] = decode_ms;
  j["reselect_ms"] = reselect_ms;
  j["kv_cold_bytes"] = kv_cold_bytes;
  j["decode_rows"] = decode_rows;
  j["n_generated"] = n_generated;
  j["stop"] = stop;
  if (has_fidelity) {
    j["kl"] = fidelity.kl;
    j["top1"] = fidelity.top1;
    j["ppl_full"] = fidelity.ppl_full;
    j["ppl"] = fidelity.ppl;
    j["ppl_delta"] = fidelity.ppl - fidelity.ppl_full;
    j["n_scored"] = fidelity.n;
  }
  return j;
}

Runner::Runner(const Engine& engine, Workspace& ws, RunnerOptions opt) : engine_(&engine), ws_(&ws), opt_(opt) {
  if (opt_.max_decode_rows < 1) throw Error("eval: max_decode_rows must be >= 1");
  if (opt_.fidelity_chunk < 1) throw Error("eval: fidelity_chunk must be >= 1");
}

std::vector<Record> Runner::run(const Sample& s, const std::vector<PressRun>& presses, Protocol p,
                                const std::function<bool(size_t, int)>& skip) {
  last_prefill_ms_ = 0;
  const bool fid = s.task == "fidelity";
  if (fid != (p == Protocol::Continuation))
    throw Error(
        fmt::format("{}: protocol {} does not apply (fidelity takes continuation, the other tasks aware, "
                    "agnostic, multi, reselect or followup)",
                    s.id, protocol_name(p)));
  return fid ? run_fidelity(s, presses, skip) : run_generate(s, presses, p, skip);
}

namespace {

// A sequence being decoded and the record it fills.
struct Job {
  std::unique_ptr<Sequence> seq;
  Record rec;
  std::vector<int32_t> out;
  int32_t last = -1;
  bool done = false;
};

Record base_record(const Sample& s, const PressRun& pr, Protocol p, int question) {
  Record r;
  r.sample_id = s.id;
  r.task = s.task;
  r.length = s.length;
  r.index = s.index;
  r.seed = s.seed;
  r.depth = s.depth;
  r.depth_actual = s.depth_actual;
  r.press = pr.canonical;
  r.press_name = pr.name;
  r.ratio = pr.ratio;
  r.budget = pr.budget;
  r.protocol = p;
  r.question = question;
  r.n_context_tokens = static_cast<int64_t>(p == Protocol::Aware      ? s.ids.size()
                                            : p == Protocol::Followup ? s.ids.context.size() + s.questions[0].ids.size()
                                                                      : s.ids.context.size());
  return r;
}

void note_cache(Record& r, const Sequence& seq) {
  const SequenceStats& st = seq.stats();
  r.kv_cache_bytes = st.kv_cache_bytes;
  r.kv_cache_bytes_full = st.kv_cache_bytes_full;
  r.compressed = st.compressed;
  r.kept_budget = st.budget;
  r.compression_note = st.compression_note;
  r.window = st.window;
}

// Greedy decoding of `jobs` together, at most `max_rows` rows per step.
void decode(const Engine& e, Workspace& ws, std::vector<Job>& jobs, int gen_tokens, int max_rows) {
  const Tokenizer& tok = e.tokenizer();
  const auto t0 = Clock::now();
  auto accept = [&](Job& j, int32_t t) {
    if (tok.is_eog(t)) {
      j.done = true;
      j.rec.stop = "eos";
      return;
    }
    j.out.push_back(t);
    j.last = t;
    if (static_cast<int>(j.out.size()) >= gen_tokens) {
      j.done = true;
      j.rec.stop = "n_predict";
    } else if (j.seq->n_past() >= j.seq->n_ctx()) {
      j.done = true;
      j.rec.stop = "context_full";
    }
  };
  for (Job& j : jobs) {
    if (gen_tokens <= 0) {
      j.done = true;
      j.rec.stop = "n_predict";
      continue;
    }
    accept(j, argmax(j.seq->prefill_logits()));
  }
  Batch b;
  for (;;) {
    std::vector<Job*> active;
    for (Job& j : jobs)
      if (!j.done) active.push_back(&j);
    if (active.empty()) break;
    for (size_t at = 0; at < active.size(); at += static_cast<size_t>(max_rows)) {
      b.clear();
      const size_t end = std::min(active.size(), at + static_cast<size_t>(max_rows));
      for (size_t i = at; i < end; ++i) b.add(*active[i]->seq, active[i]->last);
      e.step(b, ws);
      for (size_t i = at; i < end; ++i) accept(*active[i], argmax(b.logits(static_cast<int>(i - at))));
    }
  }
  const double ms = ms_since(t0);
  for (Job& j : jobs) {
    TokenStreamDecoder dec(tok);
    std::string text;
    for (int32_t t : j.out) text += dec.push(t);
    text += dec.flush();
    j.rec.answer = postprocess_pred(text);
    j.rec.tokens = j.out;
    j.rec.n_generated = static_cast<int64_t>(j.out.size());
    j.rec.score = string_match_all(j.rec.answer, j.rec.expected);
    j.rec.decode_ms = ms;
    j.rec.decode_rows = static_cast<int>(std::min<size_t>(jobs.size(), static_cast<size_t>(max_rows)));
  }
}

}  // namespace

std::vector<Record> Runner::run_generate(const Sample& s, const std::vector<PressRun>& presses, Protocol p,
                                         const std::function<bool(size_t, int)>& skip) {
  const Engine& e = *engine_;
  Workspace& ws = *ws_;
  const int gen = opt_.gen_tokens > 0 ? opt_.gen_tokens : s.gen_tokens;
  std::vector<int32_t> prompt = s.ids.context;
  // The question compressed with the context: the sample's (aware) or question 0 (followup).
  const std::vector<int32_t>* asked = p == Protocol::Aware      ? &s.ids.question
                                      : p == Protocol::Followup ? &s.questions.at(0).ids
                                                                : nullptr;
  if (asked) prompt.insert(prompt.end(), asked->begin(), asked->end());
  const auto n_prompt = static_cast<int64_t>(prompt.size());
  // The question span of the compressed prompt (window=question): the question and the template's
  // closing tokens in the aware protocols; unknown (0) when the context is compressed alone.
  const int64_t n_question = asked ? static_cast<int64_t>(asked->size()) : 0;
  const bool multi = multi_question(p);
  const int n_questions = multi ? static_cast<int>(s.questions.size()) : 1;
  SequenceOptions so;
  so.n_ctx = std::max<int64_t>(s.length, static_cast<int64_t>(s.ids.size()) + gen);
  if (p == Protocol::Followup)  // the longest follow-up (question 0 is in the prompt), then the answer
    for (const Question& q : s.questions)
      so.n_ctx = std::max<int64_t>(so.n_ctx, n_prompt + static_cast<int64_t>(q.follow_up.size()) + gen);
  so.kv_type = opt_.kv_type;
  so.kv_type_v = opt_.kv_type_v;
  if (p == Protocol::Reselect) so.cold_tier = opt_.cold_tier;

  // What is still to do.
  struct Todo {
    size_t press;
    std::vector<int> questions;
  };
  std::vector<Todo> todo;
  int wmax = 1;
  bool need_base = false;
  for (size_t i = 0; i < presses.size(); ++i) {
    Todo t{i, {}};
    for (int q = 0; q < n_questions; ++q)
      if (!skip || !skip(i, q)) t.questions.push_back(q);
    if (t.questions.empty()) continue;
    const PressPlan plan = plan_press(presses[i].spec, n_prompt, n_question);
    if (!(plan.compress && plan.needs_all_queries)) need_base = true;
    if (plan.compress) wmax = std::max(wmax, plan.window);
    todo.push_back(std::move(t));
  }
  std::vector<Record> records;
  if (todo.empty()) return records;

  // The shared full-cache prefill.
  std::unique_ptr<Sequence> base;
  double base_ms = 0;
  if (need_base && !opt_.independent) {
    base = e.new_sequence(so);
    PrefillOptions po;
    po.retain_window = static_cast<int>(std::min<int64_t>(wmax, n_prompt));
    po.question_tokens = n_question;
    const auto t0 = Clock::now();
    e.prefill(*base, prompt, po, ws);
    base_ms = ms_since(t0);
    last_prefill_ms_ += base_ms;
  }

  std::vector<Job> pending;
  auto flush = [&] {
    if (pending.empty()) return;
    decode(e, ws, pending, gen, opt_.max_decode_rows);
    for (Job& j : pending) records.push_back(std::move(j.rec));
    pending.clear();
  };
  for (const Todo& t : todo) {
    const PressRun& pr = presses[t.press];
    const PressPlan plan = plan_press(pr.spec, n_prompt, n_question);
    const bool alone = opt_.independent || (plan.compress && plan.needs_all_queries);
    // The compressed prompt (context only, or context + question for aware).
    auto compressed = [&](Record& r) {
      std::unique_ptr<Sequence> seq;
      if (alone) {
        seq = prefill_alone(e, so, prompt, n_question, pr.spec, ws, r);
        if (!opt_.independent) last_prefill_ms_ += r.prefill_ms;
      } else {
        seq = base->fork();
        const auto t0 = Clock::now();
        if (pr.name != "none") seq->compress(pr.spec, ws);
        r.compress_ms = ms_since(t0);
        r.prefill_ms = base_ms;
        r.forked = true;
      }
      note_cache(r, *seq);
      return seq;
    };
    if (!multi) {
      Job j;
      j.rec = base_record(s, pr, p, 0);
      j.rec.expected = s.expected;
      j.rec.n_prompt_tokens = static_cast<int64_t>(s.ids.size());
      j.seq = compressed(j.rec);
      if (p == Protocol::Agnostic) {
        const auto t0 = Clock::now();
        e.prefill(*j.seq, s.ids.question, {}, ws);
        j.rec.question_ms = ms_since(t0);
      }
      pending.push_back(std::move(j));
      if (static_cast<int>(pending.size()) >= opt_.max_decode_rows) flush();
      continue;
    }
    // Multi: one compression, then each question from a copy of the compressed state.
    Record proto = base_record(s, pr, p, 0);
    std::unique_ptr<Sequence> c = opt_.independent ? nullptr : compressed(proto);
    for (size_t k = 0; k < t.questions.size(); ++k) {
      const int q = t.questions[k];
      const Question& qq = s.questions[static_cast<size_t>(q)];
      Job j;
      j.rec = proto;
      j.rec.question = q;
      j.rec.expected = qq.expected;
      const std::vector<int32_t>& feed = p == Protocol::Followup ? qq.follow_up : qq.ids;
      j.rec.n_prompt_tokens = static_cast<int64_t>(p == Protocol::Followup ? prompt.size() + feed.size()
                                                                           : s.ids.context.size() + qq.ids.size());
      if (p == Protocol::Followup && q > 0 && feed.empty())
        throw Error(fmt::format("{}: question {} has no follow-up ids", s.id, q));
      if (opt_.independent) {
        j.seq = compressed(j.rec);
      } else {
        j.seq = k + 1 < t.questions.size() ? c->fork() : std::move(c);
      }
      const auto t0 = Clock::now();
      PrefillOptions pq;
      pq.reselect = p == Protocol::Reselect;  // the question re-selects from the cold tier
      // followup's question 0 is already in the compressed prompt: its answer starts there.
      if (!feed.empty() && !(p == Protocol::Followup && q == 0)) e.prefill(*j.seq, feed, pq, ws);
      j.rec.question_ms = ms_since(t0);
      j.rec.reselect_ms = j.seq->stats().reselect_ms;
      j.rec.kv_cold_bytes = j.seq->stats().kv_cold_bytes;
      pending.push_back(std::move(j));
      if (static_cast<int>(pending.size()) >= opt_.max_decode_rows) flush();
    }
  }
  flush();
  return records;
}

std::vector<Record> Runner::run_fidelity(const Sample& s, const std::vector<PressRun>& presses,
                                         const std::function<bool(size_t, int)>& skip) {
  const Engine& e = *engine_;
  Workspace& ws = *ws_;
  const auto& ctx = s.ids.context;
  const auto n_ctx_tokens = static_cast<int64_t>(ctx.size());
  if (s.continuation.size() < 2) throw Error(fmt::format("{}: no continuation to score", s.id));
  const std::vector<int32_t> feed(s.continuation.begin(), s.continuation.end() - 1);
  SequenceOptions so;
  so.n_ctx = n_ctx_tokens + static_cast<int64_t>(feed.size());
  so.kv_type = opt_.kv_type;
  so.kv_type_v = opt_.kv_type_v;
  std::vector<size_t> todo;
  int wmax = 1;
  for (size_t i = 0; i < presses.size(); ++i) {
    if (skip && skip(i, 0)) continue;
    todo.push_back(i);
    const PressPlan plan = plan_press(presses[i].spec, n_ctx_tokens);
    if (plan.compress) wmax = std::max(wmax, plan.window);
  }
  std::vector<Record> records;
  if (todo.empty()) return records;
  std::unique_ptr<Sequence> base = e.new_sequence(so);
  PrefillOptions po;
  po.retain_window = static_cast<int>(std::min<int64_t>(wmax, n_ctx_tokens));
  auto t0 = Clock::now();
  e.prefill(*base, ctx, po, ws);
  const double base_ms = ms_since(t0);
  last_prefill_ms_ = base_ms;
  // The reference is always computed with exact prefill attention: when the workspace is not
  // exact (--prefill-attn bf16), its prefill and teacher-forced chunks run in an exact workspace
  // of the same size and threads.
  std::optional<Workspace> exact_ws;
  Workspace* ref_ws = &ws;
  if (ws.prefill_attention() != PrefillAttention::Exact) {
    exact_ws.emplace(
        e, WorkspaceOptions{
               .n_threads = ws.n_threads(), .max_rows = ws.max_rows(), .prefill_attention = PrefillAttention::Exact});
    ref_ws = &*exact_ws;
  }
  // A reference of another element type, or of other arithmetic, is prefilled on its own (full
  // cache, no press); otherwise it is a fork of the shared prefill.
  std::unique_ptr<Sequence> ref_base;
  const bool other_types = opt_.reference_kv_type && (*opt_.reference_kv_type != opt_.kv_type ||
                                                      *opt_.reference_kv_type != opt_.kv_type_v.value_or(opt_.kv_type));
  if (other_types || exact_ws) {
    SequenceOptions ro = so;
    if (opt_.reference_kv_type) {
      ro.kv_type = *opt_.reference_kv_type;
      ro.kv_type_v.reset();
    }
    ref_base = e.new_sequence(ro);
    t0 = Clock::now();
    e.prefill(*ref_base, ctx, PrefillOptions{}, *ref_ws);
    last_prefill_ms_ += ms_since(t0);
  }
  const size_t group = static_cast<size_t>(opt_.max_decode_rows);
  const auto V = static_cast<size_t>(e.info().n_vocab);
  for (size_t g0 = 0; g0 < todo.size(); g0 += group) {
    const size_t g1 = std::min(todo.size(), g0 + group);
    std::unique_ptr<Sequence> ref = (ref_base ? ref_base : base)->fork();
    std::vector<std::unique_ptr<Sequence>> seqs;
    std::vector<Record> recs;
    std::vector<FidelityAccum> acc(g1 - g0);
    for (size_t k = g0; k < g1; ++k) {
      const PressRun& pr = presses[todo[k]];
      Record r = base_record(s, pr, Protocol::Continuation, 0);
      r.n_context_tokens = n_ctx_tokens;
      r.n_prompt_tokens = n_ctx_tokens + static_cast<int64_t>(feed.size());
      const PressPlan plan = plan_press(pr.spec, n_ctx_tokens);
      std::unique_ptr<Sequence> seq;
      if (opt_.independent || (plan.compress && plan.needs_all_queries)) {
        seq = prefill_alone(e, so, ctx, 0, pr.spec, ws, r);
        if (!opt_.independent) last_prefill_ms_ += r.prefill_ms;
      } else {
        seq = base->fork();
        t0 = Clock::now();
        if (pr.name != "none") seq->compress(pr.spec, ws);
        r.compress_ms = ms_since(t0);
        r.prefill_ms = base_ms;
        r.forked = true;
      }
      note_cache(r, *seq);
      seqs.push_back(std::move(seq));
      recs.push_back(std::move(r));
    }
    // Teacher forcing, chunk by chunk: row i of a chunk predicts the token after it.
    std::vector<float> ref_logits, logits;
    t0 = Clock::now();
    for (size_t a = 0; a < feed.size(); a += static_cast<size_t>(opt_.fidelity_chunk)) {
      const size_t b = std::min(feed.size(), a + static_cast<size_t>(opt_.fidelity_chunk));
      const std::span<const int32_t> chunk(feed.data() + a, b - a);
      PrefillOptions pr;
      pr.all_logits = &ref_logits;
      e.prefill(*ref, chunk, pr, *ref_ws);
      for (size_t k = 0; k < seqs.size(); ++k) {
        PrefillOptions pk;
        pk.all_logits = &logits;
        e.prefill(*seqs[k], chunk, pk, ws);
        for (size_t i = 0; i < chunk.size(); ++i)
          acc[k].add(std::span<const float>(ref_logits.data() + i * V, V),
                     std::span<const float>(logits.data() + i * V, V), s.continuation[a + i + 1]);
      }
    }
    const double ms = ms_since(t0);
    for (size_t k = 0; k < recs.size(); ++k) {
      recs[k].has_fidelity = true;
      recs[k].fidelity = acc[k].stats();
      recs[k].decode_ms = ms;
      recs[k].decode_rows = static_cast<int>(recs.size());
      recs[k].n_generated = static_cast<int64_t>(feed.size());
      recs[k].stop = "teacher_forced";
      records.push_back(std::move(recs[k]));
    }
  }
  return records;
}

}  // namespace snapkv::eval
