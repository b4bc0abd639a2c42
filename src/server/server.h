// snapkv server: `snapkv serve` — an OpenAI-compatible HTTP server (cpp-httplib) over the
// Scheduler. run_server() binds, loads the model (GET /health answers 503 until it is loaded),
// serves until SIGINT/SIGTERM, then shuts down gracefully and returns 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "server/request.h"
#include "server/scheduler.h"
#include "snapkv/prefill_attention.h"

namespace snapkv::server {

/// HTTP threads at most by default: idle or slow connections each hold one.
inline constexpr int kDefaultHttpThreads = 1024;

struct ServerOptions {
  std::string model_path;  ///< resolved GGUF path
  std::string host = "127.0.0.1";
  int port = 8080;
  int n_threads = 0;
  /// Prefill attention arithmetic of the engine (EngineOptions::prefill_attention; --prefill-attn).
  PrefillAttention prefill_attention = PrefillAttention::Exact;
  SchedulerOptions scheduler;
  RequestDefaults defaults;
  std::string api_key;               ///< "" = no authentication
  bool metrics = true;               ///< serve GET /metrics
  size_t max_body_bytes = 8u << 20;  ///< larger bodies: 413
  int http_threads = 0;              ///< most HTTP threads (one per open connection); 0: kDefaultHttpThreads
  double read_timeout_s = 10;        ///< a connection silent this long while a request is read is dropped
  double shutdown_grace_s = 10;      ///< running streams may finish for this long after a signal
  int retry_after_s = 1;             ///< Retry-After of a 429
};

/// Runs the server until SIGINT or SIGTERM. Returns the exit status (0 after a clean shutdown).
/// Throws snapkv::Error when the address cannot be bound or the model cannot be loaded.
int run_server(const ServerOptions& opt);

/// "1048576", "512MiB", "2GiB", "1.5 GiB", "64KiB", "100MB" (MB/GB: powers of 1000). Throws
/// snapkv::Error naming the text for anything else, a negative or an overflowing size.
size_t parse_byte_size(std::string_view text);

}  // namespace snapkv::server
