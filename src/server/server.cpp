// snapkv server: HTTP routes, authentication, error shape, SSE streaming, signals (see server.h).
#include "server/server.h"

#include <fmt/format.h>
#include <httplib.h>
#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "core/sha256.h"
#include "server/api_error.h"
#include "server/chat_prompt.h"
#include "server/metrics.h"
#include "server/worker_pool.h"
#include "snapkv/engine.h"
#include "snapkv/error.h"
#include "snapkv/tokenizer.h"

namespace snapkv::server {

namespace {

using nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

/// The state the handlers share. `engine` and `scheduler` are set once the model is loaded
/// (`ready`), before any handler may read them.
struct Shared {
  const ServerOptions* opt = nullptr;
  Metrics metrics;
  std::atomic<bool> ready{false};
  std::atomic<bool> stopping{false};
  std::shared_ptr<const Engine> engine;
  std::unique_ptr<Scheduler> scheduler;
  std::unique_ptr<ChatPrompter> chat;
  std::string model_id;
  int64_t n_ctx = 0;
  std::atomic<uint64_t> next_id{1};
};

void send_error(Shared& sh, httplib::Response& res, const ApiError& e) {
  res.status = e.status();
  res.set_content(dump(e.to_json()), "application/json");
  sh.metrics.http_error(e.status());
}

ApiError not_ready() { return ApiError(503, "unavailable_error", "loading", "the model is loading"); }

const char* status_type(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 404:
      return "not_found_error";
    case 429:
      return "rate_limit_error";
    case 503:
      return "unavailable_error";
    default:
      return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

/// Runs `f`, answering ApiError / snapkv::Error / anything else in OpenAI's error shape.
template <class F>
void guarded(Shared& sh, httplib::Response& res, F&& f) {
  try {
    f();
  } catch (const ApiError& e) {
    send_error(sh, res, e);
  } catch (const snapkv::Error& e) {
    send_error(sh, res, bad_request("invalid_value", e.what()));
  } catch (const std::bad_alloc&) {
    send_error(sh, res, ApiError(503, "server_error", "out_of_memory", "out of memory"));
  } catch (const std::exception& e) {
    send_error(sh, res, ApiError(500, "server_error", "internal_error", e.what()));
  }
}

json extension(const JobResult& r) {
  json x{{"kv_cache_bytes", r.kv_cache_bytes},
         {"kv_cache_bytes_full", r.kv_cache_bytes_full},
         {"peak_kv_cache_bytes", r.peak_kv_cache_bytes},
         {"kv_cache_bytes_reserved", r.kv_cache_bytes_reserved},
         {"press", r.press},
         {"compressed", r.compressed},
         {"window", r.window},
         {"compression_ms", r.compression_ms},
         {"prefill_ms", r.prefill_ms},
         {"ttft_ms", r.ttft_ms}};
  if (!r.compression_note.empty()) x["note"] = r.compression_note;
  if (!r.session.empty())
    x["session"] = json{{"id", r.session},
                        {"reused", r.session_reused},
                        {"stored", r.session_stored},
                        {"kv_cold_bytes", r.kv_cold_bytes},
                        {"reselect_ms", r.reselect_ms}};
  return x;
}

json usage(const JobResult& r) {
  return json{{"prompt_tokens", r.n_prompt_tokens},
              {"completion_tokens", r.n_generated_tokens},
              {"total_tokens", r.n_prompt_tokens + r.n_generated_tokens}};
}

/// One choice's JSON: the whole message, or a streamed delta.
json choice(Endpoint ep, const std::string& text, const json& finish_reason, bool delta, bool first) {
  json c{{"index", 0}, {"finish_reason", finish_reason}};
  if (ep == Endpoint::Completions) {
    c["text"] = text;
    c["logprobs"] = nullptr;
  } else if (delta) {
    json d = json::object();
    if (first) d["role"] = "assistant";
    if (!text.empty() || !first) d["content"] = text;
    c["delta"] = d;
  } else {
    c["message"] = json{{"role", "assistant"}, {"content", text}};
  }
  return c;
}

json envelope(Shared& sh, Endpoint ep, const std::string& id, bool chunk, int64_t created) {
  const char* object = ep == Endpoint::Completions ? "text_completion"
                       : chunk                     ? "chat.completion.chunk"
                                                   : "chat.completion";
  return json{{"id", id}, {"object", object}, {"created", created}, {"model", sh.model_id}};
}

/// Parses, tokenizes, checks the context, plans the press and projects the KV bytes.
std::shared_ptr<Job> make_job(Shared& sh, const std::string& body, Endpoint ep) {
  auto job = std::make_shared<Job>();
  job->req = parse_completion_request(body, ep, sh.opt->defaults);
  const Engine& engine = *sh.engine;
  if (ep == Endpoint::Completions) {
    job->prompt = engine.tokenizer().encode(job->req.prompt, /*add_special=*/true, /*parse_special=*/false);
  } else if (!job->req.session.empty()) {
    // A session: the context (the conversation up to the document's user message) is compressed
    // once and stored; the question (the last message) follows it, re-selecting from the cold tier.
    if (sh.opt->scheduler.session_budget_bytes == 0)
      throw bad_request("invalid_value", "sessions are off on this server (--session-budget 0)");
    try {
      auto [context, question] = sh.chat->follow_up(job->req.messages);
      job->context_tokens = static_cast<int64_t>(context.size());
      job->prompt = std::move(context);
      job->prompt.insert(job->prompt.end(), question.begin(), question.end());
    } catch (const snapkv::Error& e) {
      throw bad_request("invalid_chat", e.what());
    }
  } else {
    try {
      if (job->req.press.get("window") == std::optional<std::string>("question")) {
        // window=question: the last user message (and the turn's end) is the observation window.
        ChatTokens ct = sh.chat->tokens_with_question(job->req.messages);
        job->prompt = std::move(ct.ids);
        job->question_tokens = ct.question_tokens;
      } else {
        job->prompt = sh.chat->tokens(job->req.messages);
      }
    } catch (const snapkv::Error& e) {
      throw bad_request("invalid_chat", e.what());
    }
  }
  const auto n_prompt = static_cast<int64_t>(job->prompt.size());
  if (n_prompt == 0) throw bad_request("invalid_value", "the prompt tokenized to zero tokens");
  if (n_prompt > sh.n_ctx)
    throw bad_request("context_length_exceeded",
                      fmt::format("the prompt has {} tokens, more than the context of {} tokens", n_prompt, sh.n_ctx),
                      json{{"n_prompt_tokens", n_prompt}, {"n_ctx", sh.n_ctx}});
  const int64_t room = sh.n_ctx - n_prompt + 1;  // the last prompt position's logits give one more token
  job->max_tokens = std::min(job->req.max_tokens > 0 ? job->req.max_tokens : sh.opt->defaults.max_tokens, room);
  if (!job->req.seed_set) job->req.sampling.seed = std::random_device{}();
  // A session's press compresses the context alone (its own window, as `snapkv run --question`).
  const int64_t n_compressed = job->context_tokens > 0 ? job->context_tokens : n_prompt;
  try {
    job->plan = plan_press_spec(job->req.press, n_compressed, job->context_tokens > 0 ? 0 : job->question_tokens);
  } catch (const snapkv::Error& e) {
    // The spec was checked when the body was parsed; what is left is a ratio that would keep
    // fewer tokens of this prompt than the window and sinks that are always kept. Such a prompt is
    // served whole with the note, as one no longer than the window is: a request (or a server-wide
    // --compression-ratio) must not be refused for a prompt that is merely short.
    job->plan = PressPlanSummary{.spec = job->req.press.to_string(),
                                 .compress = false,
                                 .capacity = n_compressed,
                                 .note = fmt::format("prompt kept whole: {}", e.what())};
    job->req.press = PressSpec{};
  }
  const KVType kv_v = sh.opt->scheduler.kv_type_v.value_or(sh.opt->scheduler.kv_type);
  if (job->context_tokens > 0) {
    // The question is appended uncompressed after the compressed context, as generated tokens
    // are; a re-selection restores one compressed layer whole at a time, as the prefill did.
    job->kv = project_kv(engine.info(), sh.opt->scheduler.kv_type, kv_v, n_compressed,
                         job->max_tokens + (n_prompt - n_compressed), job->plan, n_prompt - n_compressed);
    job->fingerprint = fmt::format("{}|{}", job->req.press.to_string(),
                                   sha256_hex(std::string_view(reinterpret_cast<const char*>(job->prompt.data()),
                                                               static_cast<size_t>(n_compressed) * sizeof(int32_t))));
  } else {
    job->kv = project_kv(engine.info(), sh.opt->scheduler.kv_type, kv_v, n_prompt, job->max_tokens, job->plan);
  }
  return job;
}

void submit_or_throw(Shared& sh, const std::shared_ptr<Job>& job, httplib::Response& res) {
  switch (sh.scheduler->submit(job)) {
    case Scheduler::Submit::Queued:
      return;
    case Scheduler::Submit::QueueFull:
      sh.metrics.rejected("queue_full");
      res.set_header("Retry-After", std::to_string(sh.opt->retry_after_s));
      throw ApiError(429, "rate_limit_error", "queue_full", "the request queue is full; retry later");
    case Scheduler::Submit::TooLarge:
      sh.metrics.rejected("too_large");
      throw bad_request("kv_budget_exceeded",
                        fmt::format("the request needs up to {} bytes of KV cache, more than --kv-memory-budget {}",
                                    job->kv.reserve(), sh.scheduler->kv_budget()),
                        json{{"kv_bytes_needed", job->kv.reserve()}, {"kv_memory_budget", sh.scheduler->kv_budget()}});
    case Scheduler::Submit::ShuttingDown:
      sh.metrics.rejected("shutting_down");
      throw ApiError(503, "unavailable_error", "shutting_down", "the server is shutting down");
  }
}

json finish_reason_json(const JobResult& r) { return r.finish_reason == "length" ? "length" : "stop"; }

void completion(Shared& sh, const httplib::Request& req, httplib::Response& res, Endpoint ep) {
  if (!sh.ready.load()) throw not_ready();
  std::shared_ptr<Job> job = make_job(sh, req.body, ep);
  submit_or_throw(sh, job, res);
  const std::string id =
      fmt::format("{}-{}", ep == Endpoint::Completions ? "cmpl" : "chatcmpl", sh.next_id.fetch_add(1));
  const int64_t created = static_cast<int64_t>(std::time(nullptr));

  if (!job->req.stream) {
    std::string text;
    // cpp-httplib 0.11 cannot tell a handler that its client left: a non-streaming request
    // runs to its end (bounded by max_tokens); streaming requests are cancelled on disconnect.
    while (!job->take(text, std::chrono::milliseconds(200))) {
    }
    const JobResult& r = job->result();
    if (r.finish_reason == "error")
      throw ApiError(r.error_status, status_type(r.error_status), "request_failed", r.error_message);
    if (r.finish_reason == "cancelled")
      throw ApiError(503, "unavailable_error", "cancelled", "the request was cancelled");
    json out = envelope(sh, ep, id, false, created);
    out["choices"] = json::array({choice(ep, text, finish_reason_json(r), false, false)});
    out["usage"] = usage(r);
    out["snapkv"] = extension(r);
    res.set_content(dump(out), "application/json");
    return;
  }

  // Server-sent events: one chunk per piece of text, a last chunk with the finish reason, usage
  // and the extension, with stream_options.include_usage one more with no choices and the usage
  // (as OpenAI sends it), then [DONE]. A failed write (client gone) cancels the job.
  auto first = std::make_shared<bool>(true);
  auto ended = std::make_shared<bool>(false);
  Shared* shp = &sh;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");  // a proxy (nginx) in front must not hold the events back
  res.set_chunked_content_provider(
      "text/event-stream",
      [shp, job, id, created, ep, first, ended](size_t, httplib::DataSink& sink) {
        Shared& s = *shp;
        if (*ended) {
          sink.done();
          return true;
        }
        std::vector<std::string> pieces;
        const bool finished = job->take(pieces, std::chrono::milliseconds(100));
        const auto send = [&sink](const json& j) {
          const std::string line = "data: " + dump(j) + "\n\n";
          return sink.write(line.data(), line.size());
        };
        if (pieces.empty() && *first && !finished) pieces.emplace_back();  // the first chunk comes at once
        for (const std::string& text : pieces) {
          json c = envelope(s, ep, id, true, created);
          c["choices"] = json::array({choice(ep, text, nullptr, true, *first)});
          *first = false;
          if (!send(c)) {
            s.scheduler->cancel(job);
            return false;
          }
        }
        if (pieces.empty() && !finished && sink.is_writable && !sink.is_writable()) {
          s.scheduler->cancel(job);
          return false;
        }
        if (!finished) return true;
        const JobResult& r = job->result();
        if (r.finish_reason == "error" || r.finish_reason == "cancelled") {
          const int status = r.finish_reason == "error" ? r.error_status : 503;
          const ApiError e(status, status_type(status), r.finish_reason == "error" ? "request_failed" : "cancelled",
                           r.finish_reason == "error" ? r.error_message : "the request was cancelled");
          if (!send(e.to_json())) return false;
        } else {
          json c = envelope(s, ep, id, true, created);
          c["choices"] = json::array({choice(ep, "", finish_reason_json(r), true, false)});
          // With include_usage the usage comes once, in OpenAI's last chunk (a client that sums
          // the usage of every chunk, as langchain-openai does, must not count it twice).
          c["usage"] = job->req.include_usage ? json(nullptr) : usage(r);
          c["snapkv"] = extension(r);
          if (!send(c)) return false;
          if (job->req.include_usage) {  // OpenAI's usage chunk: no choices, after the finish chunk
            json u = envelope(s, ep, id, true, created);
            u["choices"] = json::array();
            u["usage"] = usage(r);
            if (!send(u)) return false;
          }
        }
        static constexpr char kDone[] = "data: [DONE]\n\n";
        if (!sink.write(kDone, sizeof(kDone) - 1)) return false;
        *ended = true;
        sink.done();
        return true;
      },
      [shp, job](bool success) {
        if (!success) shp->scheduler->cancel(job);
      });
}

json body_object(const httplib::Request& req) {
  json body = json::parse(req.body, nullptr, false);
  if (body.is_discarded()) throw bad_request("invalid_json", "the request body is not valid JSON (UTF-8)");
  if (!body.is_object()) throw bad_request("invalid_type", "the request body must be a JSON object");
  return body;
}

void tokenize(Shared& sh, const httplib::Request& req, httplib::Response& res) {
  if (!sh.ready.load()) throw not_ready();
  const json body = body_object(req);
  const auto c = body.find("content");
  if (c == body.end() || !c->is_string()) throw bad_request("invalid_type", "'content' must be a string");
  bool add_special = false, with_pieces = false;
  if (const auto a = body.find("add_special"); a != body.end()) {
    if (!a->is_boolean()) throw bad_request("invalid_type", "'add_special' must be a boolean");
    add_special = a->get<bool>();
  }
  if (const auto w = body.find("with_pieces"); w != body.end()) {
    if (!w->is_boolean()) throw bad_request("invalid_type", "'with_pieces' must be a boolean");
    with_pieces = w->get<bool>();
  }
  const Tokenizer& tok = sh.engine->tokenizer();
  const std::vector<int32_t> ids = tok.encode(c->get<std::string>(), add_special, /*parse_special=*/false);
  json tokens = json::array();
  for (int32_t id : ids) {
    if (with_pieces) {
      std::string piece;
      append_valid_utf8(piece, tok.token_to_piece(id), false);
      tokens.push_back(json{{"id", id}, {"piece", piece}});
    } else {
      tokens.push_back(id);
    }
  }
  res.set_content(dump(json{{"tokens", tokens}}), "application/json");
}

void detokenize(Shared& sh, const httplib::Request& req, httplib::Response& res) {
  if (!sh.ready.load()) throw not_ready();
  const json body = body_object(req);
  const auto t = body.find("tokens");
  if (t == body.end() || !t->is_array()) throw bad_request("invalid_type", "'tokens' must be an array of token ids");
  const int32_t n_vocab = sh.engine->info().n_vocab;
  std::vector<int32_t> ids;
  for (size_t i = 0; i < t->size(); ++i) {
    const json& v = (*t)[i];
    if (!v.is_number_integer() && !v.is_number_unsigned())
      throw bad_request("invalid_type", fmt::format("'tokens[{}]' must be an integer", i));
    if (v.is_number_unsigned() ? v.get<uint64_t>() >= static_cast<uint64_t>(n_vocab)
                               : (v.get<int64_t>() < 0 || v.get<int64_t>() >= n_vocab))
      throw bad_request("invalid_value", fmt::format("'tokens[{}]' is outside the vocabulary [0, {})", i, n_vocab));
    ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  std::string text;
  append_valid_utf8(text, sh.engine->tokenizer().decode(ids), false);
  res.set_content(dump(json{{"content", text}}), "application/json");
}

bool authorized(const ServerOptions& opt, const httplib::Request& req) {
  if (opt.api_key.empty()) return true;
  const std::string h = req.get_header_value("Authorization");
  static constexpr std::string_view kBearer = "Bearer ";
  if (h.size() != kBearer.size() + opt.api_key.size() || h.compare(0, kBearer.size(), kBearer) != 0) return false;
  // Constant-time comparison of the key.
  unsigned diff = 0;
  for (size_t i = 0; i < opt.api_key.size(); ++i)
    diff |= static_cast<unsigned char>(h[kBearer.size() + i]) ^ static_cast<unsigned char>(opt.api_key[i]);
  return diff == 0;
}

/// The methods the routes serve; any other is refused from its headers (cpp-httplib would read a
/// body for PUT, PATCH, DELETE and PRI, the last without a length until the client closes).
bool served_method(const httplib::Request& req) {
  return req.method == "GET" || req.method == "HEAD" || req.method == "POST" || req.method == "OPTIONS";
}

ApiError invalid_api_key() {
  return ApiError(401, "authentication_error", "invalid_api_key",
                  "missing or wrong API key (Authorization: Bearer KEY)");
}

/// Marks a response whose request reached the pre-routing checks (removed before it is sent).
constexpr const char* kCheckedHeader = "X-Snapkv-Checked";

/// The request's one Content-Length as a number of bytes (0 without one; leading zeros and more
/// than 19 digits allowed, the latter read as UINT64_MAX); false if it is not a decimal number.
bool content_length(const httplib::Request& req, uint64_t& bytes) {
  bytes = 0;
  if (!req.has_header("Content-Length")) return true;
  std::string v = req.get_header_value("Content-Length");
  if (v.empty() || !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
  v.erase(0, std::min(v.find_first_not_of('0'), v.size() - 1));  // leading zeros
  bytes = v.size() > 19 ? UINT64_MAX : std::stoull(v);           // 19 digits always fit in 64 bits
  return true;
}

/// The routes that read a request body (POST), registered from this table only; their handlers
/// check the API key themselves (check_api_key), after the body was read.
using BodyHandler = void (*)(Shared&, const httplib::Request&, httplib::Response&);
constexpr std::pair<const char*, BodyHandler> kBodyRoutes[] = {
    {"/v1/completions", [](Shared& sh, const httplib::Request& req,
                           httplib::Response& res) { completion(sh, req, res, Endpoint::Completions); }},
    {"/v1/chat/completions", [](Shared& sh, const httplib::Request& req,
                                httplib::Response& res) { completion(sh, req, res, Endpoint::ChatCompletions); }},
    {"/tokenize", &tokenize},
    {"/detokenize", &detokenize},
};

bool is_body_route(const std::string& path) {
  return std::any_of(std::begin(kBodyRoutes), std::end(kBodyRoutes), [&](const auto& r) { return path == r.first; });
}

/// The API key check of a route that reads a body (the pre-routing handler let the request
/// through unauthorized so that its body is read first): answers 401 and returns false.
bool check_api_key(Shared& sh, const httplib::Request& req, httplib::Response& res) {
  if (authorized(*sh.opt, req)) return true;
  send_error(sh, res, invalid_api_key());
  return false;
}

void routes(httplib::Server& http, Shared& sh) {
  const ServerOptions& opt = *sh.opt;
  // Runs after the headers are read and before the body is. Refuses what cannot be read safely
  // or cheaply; every refusal of a request that carried a body also closes the connection after
  // the answer (the post-routing handler below), so no unread body is parsed as a request.
  http.set_pre_routing_handler([&sh, &opt](const httplib::Request& req, httplib::Response& res) {
    res.set_header(kCheckedHeader, "1");  // reached these checks (taken off again in post-routing)
    // Answers are never cut to a requested Range (a streamed one would come back as 206, and many
    // ranges copy the answer once each). req is a local of cpp-httplib's process_request.
    const_cast<httplib::Request&>(req).ranges.clear();
    auto refuse = [&](const ApiError& e) {
      send_error(sh, res, e);
      return httplib::Server::HandlerResponse::Handled;
    };
    if (!served_method(req))
      return refuse(ApiError(405, "invalid_request_error", "method_not_allowed",
                             fmt::format("method {} is not served here", req.method)));
    // cpp-httplib 0.11 checks --max-body against Content-Length only: a chunked body, or one
    // without a length (read until the client closes), would be read into memory whole. Every
    // body must say its length (OpenAI's clients, curl and nginx do).
    if (req.has_header("Transfer-Encoding") || (req.method == "POST" && !req.has_header("Content-Length")))
      return refuse(ApiError(411, "invalid_request_error", "length_required",
                             "a request body needs a Content-Length header (chunked bodies are not accepted)"));
    // Several Content-Length fields, or one that is not a plain decimal number ("5, 5", "+5",
    // "5abc", which cpp-httplib reads as 5): a proxy in front may read another length than this
    // server, and the two would split the stream into different requests (RFC 9112, 6.3).
    // (cpp-httplib has already trimmed and percent-decoded the value: "%35" arrives as "5".)
    uint64_t body_bytes = 0;
    if (const size_t n = req.get_header_value_count("Content-Length"); n > 1 || !content_length(req, body_bytes))
      return refuse(ApiError(400, "invalid_request_error", "invalid_content_length",
                             n > 1 ? "the request has more than one Content-Length header"
                                   : "the Content-Length header is not a decimal number of bytes"));
    if (body_bytes > opt.max_body_bytes)
      return refuse(ApiError(413, "invalid_request_error", "payload_too_large",
                             fmt::format("the request body is larger than {} bytes", opt.max_body_bytes)));
    if (body_bytes > 0) {
      // The routes take bodies with POST only.
      if (req.method != "POST")
        return refuse(ApiError(400, "invalid_request_error", "unexpected_body",
                               fmt::format("a {} request cannot carry a body here", req.method)));
      // cpp-httplib would inflate a compressed body past --max-body, and parse a multipart one.
      const std::string enc = req.get_header_value("Content-Encoding");
      if (!enc.empty() && enc != "identity")
        return refuse(ApiError(415, "invalid_request_error", "unsupported_content_encoding",
                               "compressed request bodies (Content-Encoding) are not accepted"));
      if (req.get_header_value("Content-Type").rfind("multipart/", 0) == 0)
        return refuse(ApiError(415, "invalid_request_error", "unsupported_media_type",
                               "multipart request bodies are not accepted: send application/json"));
    }
    // A missing or wrong API key: a POST to a route that reads its body is refused by the route
    // once cpp-httplib has read the body (check_api_key; closing with the body unread would reset
    // the connection and could lose the answer); every other request here and now.
    if (req.path != "/health" && !authorized(opt, req)) {
      if (req.method == "POST" && is_body_route(req.path)) return httplib::Server::HandlerResponse::Unhandled;
      return refuse(invalid_api_key());
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // An answer >= 400 closes the connection once it is written when a body may be left unread on
  // it: the request never reached the checks above (cpp-httplib's own 400 / 414 answers, made
  // before its headers were all read), or it carried a body that was not read whole (refused
  // here, a read timeout in the body, chunked, two lengths). cpp-httplib 0.11 has no call for
  // that, but a content provider that has written the whole answer and then reports failure ends
  // its keep-alive loop. A body left unread is then never parsed as a request of its own; a
  // client still sending one may see a reset. Answers after a body was read whole (a wrong key
  // on a body route, bad JSON, 429) keep the connection.
  http.set_post_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    const bool checked = res.has_header(kCheckedHeader);
    res.headers.erase(kCheckedHeader);
    if (res.status < 400) return;
    uint64_t declared = 0;
    const bool framed = req.get_header_value_count("Content-Length") <= 1 && !req.has_header("Transfer-Encoding") &&
                        content_length(req, declared);
    // A method the routes do not serve (PRI) may send a body without a length: close after it too.
    if (checked && framed && served_method(req) && req.body.size() >= declared) return;
    auto& r = const_cast<httplib::Request&>(req);  // a local of cpp-httplib's process_request
    const bool head = r.method == "HEAD";
    if (head) r.method = "GET";  // HEAD answers skip the provider that closes; it writes no body
    const std::string type = res.get_header_value("Content-Type");
    auto body = std::make_shared<std::string>(std::move(res.body));
    res.body.clear();
    res.headers.erase("Content-Type");
    res.headers.erase("Keep-Alive");
    res.headers.erase("Connection");
    res.set_header("Connection", "close");
    const std::string ct = type.empty() ? "application/json" : type;
    if (body->empty() || head) {
      res.set_content_provider(ct, [](size_t, httplib::DataSink&) { return false; });
    } else {
      res.set_content_provider(body->size(), ct, [body](size_t offset, size_t length, httplib::DataSink& sink) {
        if (offset < body->size()) sink.write(body->data() + offset, std::min(length, body->size() - offset));
        return false;  // after the whole answer: ends the connection
      });
    }
  });
  http.set_error_handler([&sh](const httplib::Request& req, httplib::Response& res) {
    // An error answer is never cut to a Range the request asked for (cpp-httplib would slice it
    // here and again in a content provider). req is a local of cpp-httplib's process_request.
    const_cast<httplib::Request&>(req).ranges.clear();
    if (!res.body.empty() || res.has_header("Content-Type")) return;  // an answer of ours
    const int status = res.status;
    std::string msg;
    if (status == 404)
      msg = fmt::format("no route for {} {}", req.method, req.path);
    else if (status == 413 && req.get_header_value("Content-Type").rfind("application/x-www-form-urlencoded", 0) == 0)
      msg = "a form-encoded body over 8 KiB is refused: send Content-Type: application/json";
    else if (status == 413)
      msg = fmt::format("the request body is larger than {} bytes", sh.opt->max_body_bytes);
    else if (status == 405)
      msg = "method not allowed";
    else
      msg = fmt::format("HTTP {}", status);
    const ApiError e(status, status_type(status),
                     status == 404   ? "not_found"
                     : status == 413 ? "payload_too_large"
                                     : "http_error",
                     msg);
    res.set_content(dump(e.to_json()), "application/json");
    sh.metrics.http_error(status);
  });
  http.set_exception_handler([&sh](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(sh, res, ApiError(500, "server_error", "internal_error", what));
  });

  for (const auto& [path, handler] : kBodyRoutes) {
    http.Post(path, [&sh, handler = handler](const httplib::Request& req, httplib::Response& res) {
      if (check_api_key(sh, req, res)) guarded(sh, res, [&] { handler(sh, req, res); });
    });
  }
  http.Get("/health", [&sh](const httplib::Request&, httplib::Response& res) {
    if (!sh.ready.load()) {
      send_error(sh, res, not_ready());
      return;
    }
    res.set_content(dump(json{{"status", "ok"}}), "application/json");
  });
  http.Get("/v1/models", [&sh](const httplib::Request&, httplib::Response& res) {
    guarded(sh, res, [&] {
      if (!sh.ready.load()) throw not_ready();
      const ModelInfo& i = sh.engine->info();
      const json m{
          {"id", sh.model_id},
          {"object", "model"},
          {"created", 0},
          {"owned_by", "snapkv"},
          {"meta", {{"arch", i.arch}, {"n_ctx", sh.n_ctx}, {"n_ctx_train", i.n_ctx_train}, {"n_vocab", i.n_vocab}}}};
      res.set_content(dump(json{{"object", "list"}, {"data", json::array({m})}}), "application/json");
    });
  });
  if (opt.metrics)
    http.Get("/metrics", [&sh](const httplib::Request&, httplib::Response& res) {
      res.set_content(sh.metrics.render(), "text/plain; version=0.0.4");
    });
}

}  // namespace

size_t parse_byte_size(std::string_view text) {
  std::string s(text);
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  const std::string num = s.substr(0, i);
  std::string unit = s.substr(i);
  while (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  if (num.empty() || num.front() == '.' || std::count(num.begin(), num.end(), '.') > 1)
    throw Error(fmt::format("'{}' is not a size (e.g. 1073741824, 512MiB, 2GiB)", text));
  double mult = 1;
  if (unit.empty() || unit == "B")
    mult = 1;
  else if (unit == "KiB" || unit == "K")
    mult = 1024.0;
  else if (unit == "MiB" || unit == "M")
    mult = 1024.0 * 1024;
  else if (unit == "GiB" || unit == "G")
    mult = 1024.0 * 1024 * 1024;
  else if (unit == "TiB" || unit == "T")
    mult = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "KB" || unit == "kB")
    mult = 1e3;
  else if (unit == "MB")
    mult = 1e6;
  else if (unit == "GB")
    mult = 1e9;
  else if (unit == "TB")
    mult = 1e12;
  else
    throw Error(fmt::format("'{}': unknown size unit '{}' (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)", text, unit));
  const double v = std::strtod(num.c_str(), nullptr) * mult;
  if (!(v < 1.8e19)) throw Error(fmt::format("size '{}' is too large", text));
  if (unit.empty() && num.find('.') != std::string::npos)
    throw Error(fmt::format("'{}': a byte count must be an integer", text));
  return static_cast<size_t>(v);
}

int run_server(const ServerOptions& opt) {
  // SIGINT/SIGTERM are taken by sigwait below: block them in every thread (threads inherit the
  // mask). A peer that closed its socket must not kill the process with SIGPIPE.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  Shared sh;
  sh.opt = &opt;
  httplib::Server http;
  // One thread per open connection (cpp-httplib blocks in its reads), started as connections
  // arrive: idle or slow clients do not make the others wait until --http-threads are busy.
  const auto max_threads = static_cast<size_t>(opt.http_threads > 0 ? opt.http_threads : kDefaultHttpThreads);
  http.new_task_queue = [max_threads] { return new WorkerPool(std::min<size_t>(8, max_threads), max_threads); };
  http.set_payload_max_length(opt.max_body_bytes);
  const auto read_timeout_us = static_cast<int64_t>(opt.read_timeout_s * 1e6);
  http.set_read_timeout(static_cast<time_t>(read_timeout_us / 1000000), static_cast<time_t>(read_timeout_us % 1000000));
  http.set_write_timeout(10, 0);
  http.set_keep_alive_timeout(5);
  routes(http, sh);
  EngineOptions eo;
  eo.n_threads = opt.n_threads;
  eo.prefill_attention = opt.prefill_attention;
  // Options the engine would refuse are refused before the port is bound and "listening" logged
  // (the model itself loads after the bind, so that /health can answer "loading").
  Engine::check_options(eo);
  if (!http.bind_to_port(opt.host, opt.port))
    throw Error(fmt::format("cannot listen on {}:{} (in use, or not an address of this machine)", opt.host, opt.port));
  std::thread listener([&http] { http.listen_after_bind(); });
  spdlog::info("snapkv serve: listening on http://{}:{} (loading {})", opt.host, opt.port, opt.model_path);

  int rc = 0;
  try {
    sh.engine = Engine::load(opt.model_path, eo);
    (void)sh.engine->tokenizer();  // a model without a tokenizer cannot serve text
    const KVType kv_v = opt.scheduler.kv_type_v.value_or(opt.scheduler.kv_type);
    if (const std::string why = kv_types_problem(opt.scheduler.kv_type, kv_v, sh.engine->info().head_dim); !why.empty())
      throw Error(opt.scheduler.kv_type_v ? fmt::format("--kv-type {} / --kv-type-v {}: {}",
                                                        kv_type_name(opt.scheduler.kv_type), kv_type_name(kv_v), why)
                                          : fmt::format("--kv-type {}: {}", kv_type_name(opt.scheduler.kv_type), why));
    sh.n_ctx = opt.scheduler.n_ctx > 0 ? opt.scheduler.n_ctx : sh.engine->info().n_ctx_train;
    sh.model_id =
        sh.engine->info().name.empty() ? std::filesystem::path(opt.model_path).stem().string() : sh.engine->info().name;
    sh.chat = std::make_unique<ChatPrompter>(*sh.engine);
    if (!sh.chat->warning().empty()) spdlog::warn("snapkv serve: chat template: {}", sh.chat->warning());
    sh.scheduler = std::make_unique<Scheduler>(sh.engine, opt.scheduler, sh.metrics);
    sh.ready.store(true);
    spdlog::info(
        "snapkv serve: ready ({}, n_ctx {}, KV budget {} bytes, kv_type {} / {}, prefill_attention {}, threads {})",
        sh.model_id, sh.n_ctx, opt.scheduler.kv_budget_bytes, kv_type_name(opt.scheduler.kv_type),
        kv_type_name(opt.scheduler.kv_type_v.value_or(opt.scheduler.kv_type)),
        prefill_attention_name(sh.engine->prefill_attention()),
        opt.scheduler.n_threads > 0 ? opt.scheduler.n_threads : sh.engine->n_threads());
    int sig = 0;
    sigwait(&sigs, &sig);
    spdlog::info("snapkv serve: signal {}: shutting down", sig);
  } catch (...) {
    http.stop();
    listener.join();
    throw;
  }
  sh.stopping.store(true);
  const auto grace = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt.shutdown_grace_s));
  sh.scheduler->stop(Clock::now() + grace);  // queued: 503; running: finish or are cancelled at the deadline
  // Give the workers a moment to write the ends of their streams before the sockets close.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  http.stop();
  listener.join();
  sh.scheduler.reset();
  return rc;
}

}  // namespace snapkv::server
