// `snapkv run`: prefill (optionally compressing the prompt KV cache), then decode.
#include <fmt/format.h>
#include <omp.h>

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

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "model/model.h"
#include "quant/quant.h"
#include "runtime/session.h"
#include "snapkv/chat.h"
#include "snapkv/error.h"
#include "snapkv/sampling.h"
#include "snapkv/tokenizer.h"

namespace snapkv::cli {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// The prompt split into the part that is prefilled (and compressed) first and the part
// appended after compression (only with --question).
struct PromptParts {
  std::string context;
  std::string question;  // empty: no second phase
};

PromptParts build_prompt(const RunOptions& o, const GGUFFile& gguf) {
  if (o.prompt_file.empty() && o.prompt.empty()) throw Error("no prompt: give -p TEXT or -f FILE");
  std::string text = o.prompt_file.empty() ? o.prompt : read_text_file(o.prompt_file);
  if (text.empty()) throw Error(fmt::format("prompt file '{}' is empty (-f)", o.prompt_file));
  if (!o.chat) {
    if (o.question.empty()) return {text, ""};
    return {text, "\n\n" + o.question};
  }
  const ChatFormat fmt = detect_chat_format(gguf);
  if (o.question.empty()) {
    const std::vector<ChatMessage> msgs{{"user", text}};
    return {format_chat(fmt, msgs, true), ""};
  }
  // Context and question share one user turn; split the formatted prompt right after the
  // context so the turn markers stay where the template puts them.
  static const std::string marker = "\x1dsnapkv-question\x1d";
  const std::vector<ChatMessage> msgs{{"user", text + marker + "\n\n" + o.question}};
  const std::string full = format_chat(fmt, msgs, true);
  const size_t at = full.find(marker);
  if (at == std::string::npos) throw Error("internal: chat template lost the question marker");
  return {full.substr(0, at), full.substr(at + marker.size())};
}

KVType parse_kv_type(const std::string& s) {
  if (s == "f16") return KVType::F16;
  if (s == "f32") return KVType::F32;
  throw Error(fmt::format("--kv-type must be f16 or f32, got '{}'", s));
}

nlohmann::json kept_json(const Session& session, const RunOptions& o, int64_t n_context_tokens) {
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
  if (o.press.name == "none" && (o.budget_set || o.ratio_set)) {
    throw Error(fmt::format("{} has no effect without a press: add --press snapkv (or another policy)",
                            o.budget_set ? "--budget" : "--compression-ratio"));
  }
  if (o.press.name != "none") make_press(o.press);  // throws naming the bad setting
}

}  // namespace

int run_command(const RunOptions& opt) {
  RunOptions o = opt;
  if (o.threads <= 0) o.threads = omp_get_num_procs();
  if (o.n_predict < 0) throw Error(fmt::format("-n must be >= 0, got {}", o.n_predict));
  if (o.press.name != "none" && !o.budget_set && !o.ratio_set) o.press.budget = 1024;  // documented default
  if (o.press.name == "none") {
    o.press.budget = 0;
    o.press.compression_ratio = -1;
  }
  const KVType kv_type = parse_kv_type(o.kv_type);
  check_settings(o);
  auto dump_file = o.dump_kept.empty() ? std::unique_ptr<std::FILE, int (*)(std::FILE*)>(nullptr, &std::fclose)
                                       : open_dump_file(o.dump_kept);
  set_num_threads(o.threads);

  const std::string model_path = resolve_model_path(o.model);
  auto model = Model::load(model_path);
  auto tokenizer = Tokenizer::from_gguf(model->gguf());

  const PromptParts parts = build_prompt(o, model->gguf());
  const std::vector<int32_t> ctx_tokens = tokenizer->encode(parts.context, true, o.chat);
  const std::vector<int32_t> q_tokens =
      parts.question.empty() ? std::vector<int32_t>{} : tokenizer->encode(parts.question, false, o.chat);
  if (ctx_tokens.empty()) throw Error("the prompt tokenized to zero tokens");
  const int64_t n_prompt = static_cast<int64_t>(ctx_tokens.size() + q_tokens.size());

  const int64_t n_ctx_train = model->config().n_ctx_train;
  const int64_t n_ctx = o.n_ctx > 0 ? o.n_ctx : n_ctx_train;
  if (n_prompt > n_ctx) {
    throw Error(fmt::format("prompt of {} tokens does not fit the context of {} tokens (-c)", n_prompt, n_ctx));
  }
  SessionOptions so;
  so.n_ctx = o.n_ctx;
  so.kv_type = kv_type;
  so.press = o.press;
  std::unique_ptr<Session> session_ptr;
  try {
    session_ptr = std::make_unique<Session>(model, so);
  } catch (const std::bad_alloc&) {
    throw Error(fmt::format(
        "out of memory allocating the buffers for a context of {} tokens (-c; the model was trained with {}); "
        "use a smaller -c",
        n_ctx, n_ctx_train));
  }
  if (o.n_ctx > n_ctx_train) {
    fmt::print(stderr, "snapkv: warning: -c {} exceeds the model's training context of {} tokens\n", o.n_ctx,
               n_ctx_train);
  }
  Session& session = *session_ptr;

  uint64_t seed = o.seed;
  if (!o.seed_set) seed = std::random_device{}();
  Sampler sampler({.temp = o.temp, .top_k = o.top_k, .top_p = o.top_p, .seed = seed});

  const bool progress = !o.json && stderr_is_tty() && n_prompt >= 256;
  auto on_progress = [&](int done, int total) {
    if (progress) draw_progress("prefill", done, total);
  };

  // Prefill: the context (compressed at the end of each full-attention layer), then the
  // question, if any, appended to the compressed cache.
  const auto t0 = Clock::now();
  std::span<const float> logits = session.prefill(ctx_tokens, true, nullptr, on_progress);
  if (!q_tokens.empty()) logits = session.prefill(q_tokens, false, nullptr, on_progress);
  const double prefill_ms = ms_since(t0);

  std::vector<int32_t> generated;
  TokenStreamDecoder stream(*tokenizer);
  std::string text;
  double ttft_ms = 0.0;
  double decode_ms = 0.0;
  int n_decode_steps = 0;
  const char* stop_reason = "n_predict";  // or "eos", "context_full"
  if (o.n_predict > 0) {
    int32_t tok = sampler.sample(logits);
    ttft_ms = ms_since(t0);
    for (int i = 0; i < o.n_predict; ++i) {
      if (!o.ignore_eos && tokenizer->is_eog(tok)) {
        stop_reason = "eos";
        break;
      }
      generated.push_back(tok);
      const std::string piece = stream.push(tok);
      text += piece;
      if (!o.json) {
        if (!write_stdout(piece)) break;  // reader gone / disk full: main() reports it
      }
      if (i + 1 == o.n_predict) break;
      if (session.n_past() >= n_ctx) {
        stop_reason = "context_full";  // said on stderr once the text line is complete
        break;
      }
      const auto td = Clock::now();
      logits = session.decode(tok);
      tok = sampler.sample(logits);
      decode_ms += ms_since(td);
      ++n_decode_steps;
    }
    const std::string rest = stream.flush();
    text += rest;
    if (!o.json) write_stdout(rest + "\n");
    if (std::string_view(stop_reason) == "context_full") {
      fmt::print(stderr, "snapkv: context of {} tokens is full; generation stopped after {} tokens (-c)\n", n_ctx,
                 generated.size());
    }
  }

  if (dump_file) {
    write_dump_file(std::move(dump_file), o.dump_kept,
                    kept_json(session, o, static_cast<int64_t>(ctx_tokens.size())).dump() + "\n");
  }

  const SessionStats& st = session.stats();
  if (o.json) {
    nlohmann::json j;
    j["model"] = model_path;
    j["arch"] = model->config().arch;
    j["n_prompt_tokens"] = n_prompt;
    j["n_context_tokens"] = ctx_tokens.size();
    j["n_question_tokens"] = q_tokens.size();
    j["n_generated_tokens"] = generated.size();
    j["generated_token_ids"] = generated;
    j["stop_reason"] = stop_reason;
    j["text"] = text;
    j["ttft_ms"] = ttft_ms;
    j["prefill_ms"] = prefill_ms;
    j["prefill_tokens_per_s"] = prefill_ms > 0 ? static_cast<double>(n_prompt) * 1000.0 / prefill_ms : 0.0;
    j["decode_ms"] = decode_ms;
    j["decode_tokens_per_s"] = decode_ms > 0 ? n_decode_steps * 1000.0 / decode_ms : 0.0;
    j["kv_cache_bytes"] = st.kv_cache_bytes;
    j["kv_cache_bytes_full"] = st.kv_cache_bytes_full;
    j["peak_kv_cache_bytes"] = st.peak_kv_cache_bytes;
    j["peak_rss_bytes"] = peak_rss_bytes();
    j["threads"] = o.threads;
    j["kv_type"] = o.kv_type;
    j["press"] = o.press.name;
    j["budget"] = o.press.name == "none" ? 0 : press_capacity(o.press, static_cast<int64_t>(ctx_tokens.size()));
    j["compression_ratio"] = o.ratio_set ? nlohmann::json(o.press.compression_ratio) : nlohmann::json(nullptr);
    j["window"] = o.press.window;
    j["kernel"] = o.press.kernel;
    j["pool"] = pool_name(o.press.pool);
    j["compression_ms"] = st.compression_ms;
    j["kept_tokens_per_layer"] = st.kept_tokens_per_layer;
    j["seed"] = seed;
    write_stdout(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  }
  return 0;
}

}  // namespace snapkv::cli
