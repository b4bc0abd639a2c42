// `snapkv run`: prefill (optionally compressing the prompt KV cache), then decode.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "chat/bounded_json.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/profile_report.h"
#include "core/sha256.h"
#include "core/thread_context.h"
#include "kv/presses/press.h"
#include "runtime/press_plan.h"
#include "snapkv/snapkv.h"

namespace snapkv::cli {
namespace {

// The prompt as token ids: the part that is prefilled (and compressed) first and the part
// appended after compression (only with --question).
struct PromptTokens {
  std::vector<int32_t> context;
  std::vector<std::vector<int32_t>> questions;  // --question each (empty: no second phase)
  int64_t question_span = 0;                    // the last tokens of `context` that are its question (0: unknown)
  bool chat = false;                            // rendered with a chat template
  std::string messages;                         // the conversation (JSON array) when `chat`
};

/// -f FILE -p TEXT: the file is the document and TEXT the question after it ("\n\n" between).
constexpr std::string_view kDocumentQuestionSep = "\n\n";
/// Splits a chat prompt saved with --save-session and no --question (the context does not depend
/// on the question's text: build_prompt checks that for every --question).
constexpr const char* kPlaceholderQuestion = "?";

PromptTokens build_prompt(const RunOptions& o, const Engine& engine, bool want_span) {
  const Tokenizer& tok = engine.tokenizer();
  const bool have_text = !o.prompt_file.empty() || !o.prompt.empty();
  if (!have_text && (!o.chat || o.chat_flags.messages_file.empty())) {
    throw Error(o.chat ? "no prompt: give -p TEXT, -f FILE or --messages FILE" : "no prompt: give -p TEXT or -f FILE");
  }
  std::string text;
  size_t question_at = 0;  // byte of `text` where the question span begins
  if (have_text) {
    text = o.prompt_file.empty() ? o.prompt : read_text_file(o.prompt_file);
    if (text.empty()) throw Error(fmt::format("prompt file '{}' is empty (-f)", o.prompt_file));
    if (!o.prompt_file.empty() && !o.prompt.empty()) {
      text += kDocumentQuestionSep;
      question_at = text.size();
      text += o.prompt;
    }
  }
  if (!o.chat) {
    PromptTokens p{tok.encode(text, true, false), {}, 0, false, {}};
    for (const std::string& q : o.questions) p.questions.push_back(tok.encode("\n\n" + q, false, false));
    if (!o.questions.empty()) return p;
    if (question_at > 0) {
      // The span: the ids after the common prefix with the document's own ids (a token merged
      // across the boundary belongs to the question).
      const std::vector<int32_t> head = tok.encode(text.substr(0, question_at), true, false);
      size_t common = 0;
      while (common < head.size() && common < p.context.size() && head[common] == p.context[common]) ++common;
      p.question_span = static_cast<int64_t>(p.context.size() - common);
    }
    return p;
  }
  // The model's template (or --chat-template): template text is parsed for special tokens,
  // message text never is.
  const ChatTemplate tmpl = load_chat_template(
      o.chat_flags, [&engine] { return engine.chat_template(); }, tok);
  const std::string msgs = build_messages(o.chat_flags, have_text ? &text : nullptr);
  if (o.questions.empty() && o.save_session.empty() && want_span) {
    // window=question: the question span is the last user turn (or, with -f and -p, the -p text);
    // the ids are those of the plain render.
    ChatTokens ct = tokenize_chat_prompt_question(tmpl, tok, o.chat_flags, msgs, have_text ? question_at : 0);
    return {std::move(ct.ids), {}, ct.question_tokens, true, msgs};
  }
  if (o.questions.empty() && o.save_session.empty())
    return {tokenize_chat(tok, render_chat_prompt(tmpl, o.chat_flags, msgs, "").context, true), {}, 0, true, msgs};
  // Each question ends the same user turn; the context (everything before it) is the same text
  // for every question, so it is prefilled once. A session saved for later questions is split the
  // same way (before a placeholder question).
  PromptTokens out;
  out.chat = true;
  out.messages = msgs;
  if (o.questions.empty()) {
    out.context = tokenize_chat(tok, render_chat_prompt(tmpl, o.chat_flags, msgs, kPlaceholderQuestion).context, true);
    return out;
  }
  for (size_t i = 0; i < o.questions.size(); ++i) {
    const ChatPrompt p = render_chat_prompt(tmpl, o.chat_flags, msgs, o.questions[i]);
    std::vector<int32_t> ctx = tokenize_chat(tok, p.context, true);
    if (i == 0) {
      out.context = std::move(ctx);
    } else if (ctx != out.context) {
      throw Error("the chat template renders the context differently for each --question; ask them one at a time");
    }
    out.questions.push_back(tokenize_chat(tok, p.question, false));
  }
  return out;
}

/// Whether paths a and b name one existing file (same device and inode); false if either is
/// empty or does not exist.
bool same_file(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return false;
  std::error_code ec;
  return std::filesystem::equivalent(a, b, ec) && !ec;
}

/// Hex SHA-256 of token ids (their bytes): the identity of a saved context.
std::string ids_sha256(const std::vector<int32_t>& ids) {
  return sha256_hex(std::string_view(reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(int32_t)));
}

/// What `snapkv run` keeps in a saved session's application data to ask questions later: how the
/// context was rendered (plain text or the chat conversation) and its token ids' SHA-256.
std::string session_app_data(const PromptTokens& p, const std::vector<int32_t>& context) {
  nlohmann::json j = {{"kind", "snapkv run"},
                      {"chat", p.chat},
                      {"messages", p.messages},
                      {"n_context_tokens", context.size()},
                      {"context_sha256", ids_sha256(context)}};
  return j.dump();
}

/// The --question token ids after a context restored with --load-session: plain text as
/// build_prompt makes them; chat prompts rendered with the saved conversation, whose context must
/// tokenize to the saved one (else the template differs: an error).
std::vector<std::vector<int32_t>> session_questions(const RunOptions& o, const Engine& engine,
                                                    const std::string& app_data, int64_t n_context_tokens) {
  // The record is JSON from a file (its checksum is no MAC): parsed with bounds, as --messages is.
  nlohmann::ordered_json app;
  try {
    app = chat::parse_bounded_json(app_data, 128, 1000, "the session's prompt record");
  } catch (const Error&) {
    app = nullptr;  // not a record of snapkv run: refused below
  }
  if (!app.is_object() || !app.contains("kind") || app["kind"] != "snapkv run")
    throw Error(
        fmt::format("--load-session {}: not saved by snapkv run --save-session (no prompt record)", o.load_session));
  // The record's fields, of the types session_app_data() writes (a file edited by hand is damaged),
  // and its context length, which must be the session's.
  bool chat = false;
  std::string msgs, want;
  int64_t n_recorded = n_context_tokens;
  try {
    chat = app.value("chat", false);
    msgs = app.value("messages", "");
    want = app.value("context_sha256", "");
    if (app.contains("n_context_tokens")) {
      if (!app["n_context_tokens"].is_number_integer())
        throw Error(fmt::format("--load-session {}: the session's prompt record is damaged (n_context_tokens {})",
                                o.load_session, app["n_context_tokens"].dump()));
      n_recorded = app["n_context_tokens"].get<int64_t>();
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(
        fmt::format("--load-session {}: the session's prompt record is damaged ({})", o.load_session, e.what()));
  }
  if (n_recorded != n_context_tokens)
    throw Error(fmt::format(
        "--load-session {}: the session's prompt record is damaged (a context of {} tokens; the session holds {})",
        o.load_session, n_recorded, n_context_tokens));
  const Tokenizer& tok = engine.tokenizer();
  std::vector<std::vector<int32_t>> out;
  if (!chat && (o.chat || !o.chat_flags.template_flag.empty() || !o.chat_flags.tools_file.empty()))
    throw Error(
        fmt::format("--load-session {}: the session's prompt was saved as plain text, not a chat; drop "
                    "--chat / --chat-template / --tools",
                    o.load_session));
  if (!chat) {
    for (const std::string& q : o.questions) out.push_back(tok.encode("\n\n" + q, false, false));
    return out;
  }
  const ChatTemplate tmpl = load_chat_template(
      o.chat_flags, [&engine] { return engine.chat_template(); }, tok);
  for (const std::string& q : o.questions) {
    const ChatPrompt p = render_chat_prompt(tmpl, o.chat_flags, msgs, q);
    const std::vector<int32_t> ctx = tokenize_chat(tok, p.context, true);
    if (static_cast<int64_t>(ctx.size()) != n_context_tokens || ids_sha256(ctx) != want)
      throw Error(
          fmt::format("--load-session {}: the chat template renders the saved conversation differently from "
                      "when it was saved (give the same --chat-template and --tools as then)",
                      o.load_session));
    out.push_back(tokenize_chat(tok, p.question, false));
  }
  return out;
}

nlohmann::json kept_json(const Sequence& session, const RunOptions& o, int64_t n_context_tokens) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& kl : session.kept()) {
    nlohmann::json heads = nlohmann::json::array();
    for (size_t h = 0; h < kl.positions.size(); ++h) {
      nlohmann::json scores = nlohmann::json::array();
      for (float s : kl.scores[h]) {
        if (std::isfinite(s)) {
          scores.push_back(s);
        } else {
          scores.push_back(nullptr);  // kept unconditionally (window, sinks)
        }
      }
      heads.push_back({{"kv_head", h}, {"positions", kl.positions[h]}, {"scores", scores}});
    }
    layers.push_back({{"layer", kl.layer}, {"heads", heads}});
  }
  return {{"press", o.press.name},
          {"budget", o.press.budget},
          {"window", o.press.window},
          {"kernel", o.press.kernel},
          {"n_context_tokens", n_context_tokens},
          {"note", "scores: the value that ranked each kept position; null = kept unconditionally (window/sinks)"},
          {"layers", layers}};
}

/// One --question's answer: the result and the statistics of the fork that answered it.
struct Answer {
  std::string question;
  GenerateResult result;
  SequenceStats stats;
};

const char* pool_name(PoolType p) { return p == PoolType::Max ? "max" : "avg"; }

// Opens the --dump-kept file before any work, so that an unwritable path fails in
// milliseconds instead of after a long prefill.
std::unique_ptr<std::FILE, int (*)(std::FILE*)> open_dump_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw Error(fmt::format("cannot write --dump-kept file '{}': it is a directory", path));
  }
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) throw Error(fmt::format("cannot write --dump-kept file '{}': {}", path, std::strerror(errno)));
  return {f, &std::fclose};
}

void write_dump_file(std::unique_ptr<std::FILE, int (*)(std::FILE*)> f, const std::string& path,
                     const std::string& text) {
  const bool ok = std::fwrite(text.data(), 1, text.size(), f.get()) == text.size() && std::fflush(f.get()) == 0;
  const int err = errno;
  if (std::fclose(f.release()) != 0 || !ok) {
    throw Error(fmt::format("error writing --dump-kept file '{}': {}", path, std::strerror(ok ? errno : err)));
  }
}

// Settings that cannot be right whatever the model: checked before loading it.
void check_settings(const RunOptions& o) {
  if (!o.press_spec.empty()) {
    if (!o.press_flags.empty())
      throw Error(fmt::format("give the press settings in the --press spec or as flags, not both ({} with --press {})",
                              o.press_flags.front(), o.press_spec));
    return;  // validated when parsed
  }
  if (o.press.name == "none" && (o.budget_set || o.ratio_set)) {
    throw Error(fmt::format("{} has no effect without a press: add --press snapkv (or another policy)",
                            o.budget_set ? "--budget" : "--compression-ratio"));
  }
  if (o.press.name != "none") make_press(o.press);  // throws naming the bad setting
}

}  // namespace

PressSpec press_from_flags(const RunOptions& opt) {
  RunOptions o = opt;
  if (o.press.name != "none" && !o.budget_set && !o.ratio_set) o.press.budget = 1024;  // documented default
  if (o.press.name == "none") {
    o.press.budget = 0;
    o.press.compression_ratio = -1;
  }
  check_settings(o);
  return o.press_spec.empty() ? to_spec(o.press) : PressSpec::parse(o.press_spec);
}

int run_command(const RunOptions& opt) {
  RunOptions o = opt;
  if (o.threads <= 0) o.threads = available_cores();
  if (o.n_predict < 0) throw Error(fmt::format("-n must be >= 0, got {}", o.n_predict));
  if (o.press.name != "none" && !o.budget_set && !o.ratio_set) o.press.budget = 1024;  // documented default
  if (o.press.name == "none") {
    o.press.budget = 0;
    o.press.compression_ratio = -1;
  }
  const bool loading = !o.load_session.empty();
  // A loaded session's KV types are its own: named before the types are parsed (--kv-type-v
  // alone would otherwise be checked against the default f16 keys).
  if (loading && (o.kv_type_set || !o.kv_type_v.empty()))
    throw Error(fmt::format("--load-session: the KV types are the saved session's; drop {}",
                            o.kv_type_set && !o.kv_type_v.empty() ? "--kv-type, --kv-type-v"
                            : o.kv_type_set                       ? "--kv-type"
                                                                  : "--kv-type-v"));
  const KVType kv_type = parse_kv_type(o.kv_type);
  const std::optional<KVType> kv_type_v = parse_kv_type_v(o.kv_type_v, kv_type);
  const PrefillAttention prefill_attn = parse_prefill_attention(o.prefill_attn);
  ColdTierOptions cold_tier = o.cold_tier.empty() ? ColdTierOptions{} : parse_cold_tier(o.cold_tier);
  if (loading) {
    if (!o.prompt.empty() || !o.prompt_file.empty() || !o.chat_flags.messages_file.empty() ||
        !o.chat_flags.system.empty())
      throw Error(
          "--load-session: the context comes from the session; give only --question (not -p, -f, --messages, "
          "--system)");
    if (o.questions.empty()) throw Error("--load-session answers questions about the saved context: give --question");
    // Every press setting is the saved session's: name each one given rather than ignore it.
    std::vector<std::string> press_given = o.press_flags;
    if (o.press_set || !o.press_spec.empty() || o.press.name != "none")
      press_given.insert(press_given.begin(), "--press");
    if (!press_given.empty())
      throw Error(fmt::format("--load-session: the press and its settings are the saved session's; drop {}",
                              fmt::join(press_given, ", ")));
    if (!o.dump_kept.empty())
      throw Error(
          "--load-session: the saved session was compressed when it was saved; --dump-kept logs a "
          "compression of this run: drop --dump-kept");
    if (cold_tier.enabled && cold_tier.dir.empty())
      throw Error(
          "--load-session: the cold tier's format is the saved one; only --cold-tier disk:DIR (where its rows "
          "go) may be given");
  } else {
    check_settings(o);
    if (cold_tier.enabled && o.questions.empty() && o.save_session.empty())
      throw Error("--cold-tier serves follow-up questions: give one or more --question (or --save-session)");
    if (cold_tier.enabled && o.press.name == "none" && (o.press_spec.empty() || o.press_spec == "none"))
      throw Error("--cold-tier keeps what a press evicts: give a press (--press snapkv ...)");
  }
  auto dump_file = o.dump_kept.empty() ? std::unique_ptr<std::FILE, int (*)(std::FILE*)>(nullptr, &std::fclose)
                                       : open_dump_file(o.dump_kept);

  const std::string model_path = resolve_model_path(o.model);
  EngineOptions eo;
  eo.n_threads = o.threads;
  eo.prefill_attention = prefill_attn;
  auto engine = Engine::load(model_path, eo);
  check_kv_types(kv_type, kv_type_v, engine->info().head_dim);
  if (!o.save_session.empty()) {
    // Before the prefill, not after it: a path that cannot be saved to costs no minutes of work,
    // and no file this run reads is replaced by the session.
    check_session_target(*engine, o.save_session);
    for (const auto& [flag, input] : {std::pair<const char*, const std::string*>{"-f", &o.prompt_file},
                                      {"--messages", &o.chat_flags.messages_file},
                                      {"--chat-template", &o.chat_flags.template_flag},
                                      {"--tools", &o.chat_flags.tools_file}})
      if (same_file(o.save_session, *input))
        throw Error(fmt::format("--save-session '{}' is the file given with {}: saving would replace it",
                                o.save_session, flag));
  }

  // A loaded session brings its context, press and cold tier; the questions are rendered as the
  // saved prompt was.
  std::unique_ptr<Sequence> loaded;
  std::vector<std::vector<int32_t>> session_q;
  double load_ms = 0;
  if (loading) {
    const auto t0 = std::chrono::steady_clock::now();
    SessionLoadOptions lo;
    lo.cold_dir = cold_tier.dir;
    lo.n_ctx = o.n_ctx;
    LoadedSession ls = load_session(*engine, o.load_session, lo);
    load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    loaded = std::move(ls.sequence);
    if (cold_tier.enabled && !loaded->cold_tier().enabled)
      throw Error(fmt::format(
          "--load-session {}: the session was saved without a cold tier; --cold-tier {} has nothing to hold: drop it",
          o.load_session, o.cold_tier));
    cold_tier = loaded->cold_tier();
    session_q = session_questions(o, *engine, ls.app_data, loaded->n_past());
  }
  const bool flags_mode = o.press_spec.empty() && !loading;
  const PressSpec press_spec = loading      ? PressSpec::parse(loaded->stats().press)
                               : flags_mode ? to_spec(o.press)
                                            : PressSpec::parse(o.press_spec);
  const auto press = make_press(press_spec);  // validates the spec
  PromptTokens prompt;
  if (loading) {
    prompt.questions = std::move(session_q);  // the context's ids are not saved, only counted (n_context)
  } else {
    prompt = build_prompt(o, *engine, press->question_window());
  }
  const std::vector<int32_t> ctx_tokens = std::move(prompt.context);  // empty when loading
  const std::vector<std::vector<int32_t>> questions = std::move(prompt.questions);
  // Tokens of the context: the document's, or the loaded session's positions.
  const int64_t n_context = loading ? loaded->n_past() : static_cast<int64_t>(ctx_tokens.size());
  if (n_context == 0)
    throw Error(loading ? "--load-session: the session holds no context" : "the prompt tokenized to zero tokens");
  size_t longest_question = 0;
  for (const auto& q : questions) longest_question = std::max(longest_question, q.size());
  const std::vector<int32_t> no_question;
  const std::vector<int32_t>& q_tokens = questions.empty() ? no_question : questions[0];
  const int64_t n_prompt = n_context + static_cast<int64_t>(q_tokens.size());
  // As before the library learned to keep too-short prompts whole: a ratio that leaves fewer
  // tokens than the window, or a window not shorter than the prompt, is an error on the CLI.
  if (flags_mode && o.press.name != "none") press_capacity(o.press, n_context);

  const int64_t n_ctx_train = engine->info().n_ctx_train;
  const int64_t n_ctx = loading ? loaded->n_ctx() : o.n_ctx > 0 ? o.n_ctx : n_ctx_train;
  if (n_context + static_cast<int64_t>(longest_question) > n_ctx) {
    throw Error(fmt::format("prompt of {} tokens does not fit the context of {} tokens (-c)",
                            n_context + static_cast<int64_t>(longest_question), n_ctx));
  }
  SequenceOptions so;
  so.n_ctx = o.n_ctx;
  so.kv_type = kv_type;
  so.kv_type_v = kv_type_v;
  so.log_kept = !o.dump_kept.empty();
  so.cold_tier = cold_tier;
  auto seq = loading ? std::move(loaded) : engine->new_sequence(so);
  Workspace ws(*engine);
  ws.set_profiling(o.profile);
  if (o.n_ctx > n_ctx_train) {
    fmt::print(stderr, "snapkv: warning: -c {} exceeds the model's training context of {} tokens\n", o.n_ctx,
               n_ctx_train);
  }

  GenerateOptions go;
  go.n_predict = o.n_predict;
  go.ignore_eos = o.ignore_eos;
  uint64_t seed = o.seed;
  if (!o.seed_set) seed = std::random_device{}();
  go.sampling = {.temp = o.temp, .top_k = o.top_k, .top_p = o.top_p, .seed = seed};
  go.press = press_spec;
  go.question_tokens = prompt.question_span;
  go.reselect = cold_tier.enabled;
  const PressSpec canonical = press->spec();  // every key with its value, for the report
  const bool progress = !o.json && stderr_is_tty() && n_prompt >= 256;
  go.on_prefill_progress = [&](int done, int total) {
    if (progress) draw_progress("prefill", done, total);
  };
  if (!o.json) {
    // Stream the text as it is generated; a reader that went away / a full disk stops generation
    // (main() reports it).
    go.on_token = [](int32_t, std::string_view piece) { return write_stdout(piece); };
  }
  GenerateResult r;
  std::vector<Answer> answers;
  double doc_ms = load_ms;
  // The document alone, compressed once (its cold tier filled): before --save-session or the
  // questions; returns its time.
  auto prefill_document = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    PrefillOptions po;
    po.press = press_spec;
    po.progress = go.on_prefill_progress;
    engine->prefill(*seq, ctx_tokens, po, ws);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  if (!o.save_session.empty()) {
    doc_ms = prefill_document();  // saved before any question
    save_session(*engine, *seq, o.save_session, session_app_data(prompt, ctx_tokens));
    if (questions.empty()) {
      if (o.json) {
        const SequenceStats& ds = seq->stats();
        write_stdout(nlohmann::json{{"model", model_path},
                                    {"session", o.save_session},
                                    {"n_context_tokens", n_context},
                                    {"prefill_ms", doc_ms},
                                    {"press_spec", press->spec().to_string()},
                                    {"compressed", ds.compressed},
                                    {"compression_note", ds.compression_note},
                                    {"compression_ms", ds.compression_ms},
                                    {"kv_cache_bytes", ds.kv_cache_bytes},
                                    {"kv_cache_bytes_full", ds.kv_cache_bytes_full},
                                    {"cold_tier", cold_tier_name(cold_tier)},
                                    {"kv_cold_bytes", ds.kv_cold_bytes},
                                    {"session_bytes", std::filesystem::file_size(o.save_session)}}
                         .dump() +
                     "\n");
      } else {
        fmt::print(stderr, "snapkv: saved the context ({} tokens, {} KV bytes hot, {} cold) to {}\n", n_context,
                   seq->stats().kv_cache_bytes, seq->stats().kv_cold_bytes, o.save_session);
      }
      return 0;
    }
  }
  if (questions.empty()) {
    r = generate(*engine, *seq, ctx_tokens, {}, go, ws);
    if (!o.json && r.stop_reason != StopReason::Cancelled) write_stdout("\n");
  } else {
    // The document once (compressed, its cold tier filled; or saved / loaded), then each question
    // on a fork of it.
    if (!loading && o.save_session.empty()) doc_ms = prefill_document();
    for (size_t i = 0; i < questions.size(); ++i) {
      auto f = seq->fork();
      Answer a{o.questions[i], generate_answer(*engine, *f, questions[i], go, ws), f->stats()};
      if (!o.json && a.result.stop_reason != StopReason::Cancelled) write_stdout("\n");
      if (a.result.stop_reason == StopReason::Cancelled) break;
      answers.push_back(std::move(a));
    }
    if (answers.empty()) return 0;  // the reader went away
    // The top-level fields describe the first question as a one-question run always did.
    r = answers[0].result;
    r.n_context_tokens = n_context;
    r.ttft_ms += doc_ms;
    r.prefill_ms += doc_ms;
    r.prefill_tokens_per_s = r.prefill_ms > 0 ? static_cast<double>(n_prompt) * 1000.0 / r.prefill_ms : 0.0;
  }
  if (r.stop_reason == StopReason::ContextFull) {
    fmt::print(stderr, "snapkv: context of {} tokens is full; generation stopped after {} tokens (-c)\n", n_ctx,
               r.tokens.size());
  }

  if (dump_file) {
    write_dump_file(std::move(dump_file), o.dump_kept, kept_json(*seq, o, n_context).dump() + "\n");
  }

  if (o.profile) {
    const std::string t =
        profile_table(ws.profile().prefill, "prefill") + "\n" + profile_table(ws.profile().decode, "decode");
    fmt::print(stderr, "\nsnapkv: profile (wall time per operation, bytes of weights and KV read)\n\n{}", t);
  }
  const SequenceStats& st = answers.empty() ? seq->stats() : answers[0].stats;
  if (o.json) {
    nlohmann::json j;
    j["model"] = model_path;
    j["arch"] = engine->info().arch;
    j["n_prompt_tokens"] = n_prompt;
    j["n_context_tokens"] = n_context;
    j["n_question_tokens"] = q_tokens.size();
    j["n_generated_tokens"] = r.tokens.size();
    j["generated_token_ids"] = r.tokens;
    j["stop_reason"] = stop_reason_name(r.stop_reason);
    j["text"] = r.text;
    j["ttft_ms"] = r.ttft_ms;
    j["prefill_ms"] = r.prefill_ms;
    j["prefill_tokens_per_s"] = r.prefill_tokens_per_s;
    j["decode_ms"] = r.decode_ms;
    j["decode_tokens_per_s"] = r.decode_tokens_per_s;
    j["kv_cache_bytes"] = st.kv_cache_bytes;
    j["kv_cache_bytes_full"] = st.kv_cache_bytes_full;
    j["peak_kv_cache_bytes"] = st.peak_kv_cache_bytes;
    j["peak_rss_bytes"] = peak_rss_bytes();
    j["threads"] = o.threads;
    j["kv_type"] = kv_type_name(seq->kv_type());  // a loaded session's own
    j["kv_type_v"] = kv_type_name(seq->kv_type_v());
    j["prefill_attention"] = prefill_attention_name(ws.prefill_attention());
    j["prefill_attention_isa"] = prefill_attention_isa(ws.prefill_attention(), engine->info().head_dim);
    j["press"] = flags_mode ? o.press.name : press_spec.name;
    j["press_spec"] = canonical.to_string();
    j["compressed"] = st.compressed;
    j["compression_note"] = st.compression_note;
    j["window_used"] = st.window;  // the observation window W the press used (0: it did not compress)
    j["n_question_span_tokens"] = prompt.question_span;
    if (flags_mode) {
      j["budget"] = o.press.name == "none" ? 0 : press_capacity(o.press, n_context);
      j["compression_ratio"] = o.ratio_set ? nlohmann::json(o.press.compression_ratio) : nlohmann::json(nullptr);
      j["window"] = o.press.window;
      j["kernel"] = o.press.kernel;
      j["pool"] = pool_name(o.press.pool);
    } else {
      // From the spec: the capacity the press used (the prompt length when it kept everything).
      j["budget"] = st.compressed ? st.budget : n_context;
      auto key = [&canonical](const char* k) -> nlohmann::json {
        const auto v = canonical.get(k);
        if (!v) return nlohmann::json(nullptr);
        const auto num = nlohmann::json::parse(*v, nullptr, false);  // numbers as numbers, words as text
        return num.is_number() ? num : nlohmann::json(*v);
      };
      j["compression_ratio"] = key("ratio");
      j["window"] = key("window");
      j["kernel"] = key("kernel");
      j["pool"] = key("pool");
    }
    j["compression_ms"] = st.compression_ms;
    j["kept_tokens_per_layer"] = st.kept_tokens_per_layer;
    j["seed"] = seed;
    j["cold_tier"] = cold_tier_name(cold_tier);
    j["kv_cold_bytes"] = seq->stats().kv_cold_bytes;
    if (loading) {
      j["session"] = o.load_session;
      j["session_load_ms"] = load_ms;  // restore time (the model's sha256 on its first use included)
    } else if (!o.save_session.empty()) {
      j["session"] = o.save_session;
    }
    if (!questions.empty()) {
      nlohmann::json arr = nlohmann::json::array();
      for (const Answer& a : answers)
        arr.push_back({{"question", a.question},
                       {"text", a.result.text},
                       {"generated_token_ids", a.result.tokens},
                       {"stop_reason", stop_reason_name(a.result.stop_reason)},
                       {"n_question_tokens", a.result.n_question_tokens},
                       {"ttft_ms", a.result.ttft_ms},
                       {"reselect_ms", a.result.reselect_ms},
                       {"decode_tokens_per_s", a.result.decode_tokens_per_s},
                       {"kv_cache_bytes", a.stats.kv_cache_bytes},
                       {"kv_cold_bytes", a.stats.kv_cold_bytes}});
      j["answers"] = arr;
    }
    if (o.profile) j["profile"] = profile_json(ws.profile());
    write_stdout(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  }
  return 0;
}

}  // namespace snapkv::cli
