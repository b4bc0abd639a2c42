// snapkv server: Job — one request, shared by the HTTP worker that received it and the
// scheduler thread that runs it. The inputs are fixed before submission; the scheduler pushes
// text and finally a result through a mutex-protected channel; the worker (or the server on
// shutdown) may cancel it at any time through an atomic flag.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "server/admission.h"
#include "server/request.h"
#include "snapkv/press_spec.h"

namespace snapkv::server {

using Clock = std::chrono::steady_clock;

/// How a job ended (valid once finished).
struct JobResult {
  std::string finish_reason;  ///< "stop" (end-of-generation token or stop string), "length", "cancelled", "error"
  int error_status = 0;       ///< HTTP status of an error (finish_reason "error")
  std::string error_message;
  int64_t n_prompt_tokens = 0;
  int64_t n_generated_tokens = 0;
  size_t kv_cache_bytes = 0;  ///< held at the end of the request (before it was freed)
  size_t kv_cache_bytes_full = 0;
  size_t peak_kv_cache_bytes = 0;
  size_t kv_cache_bytes_reserved = 0;  ///< what admission reserved (project_kv)
  std::string press = "none";
  bool compressed = false;
  std::string compression_note;
  int window = 0;  ///< observation window W the press used (0: it did not compress)
  double compression_ms = 0;
  double ttft_ms = -1;
  double prefill_ms = 0;
  // Session requests (issue 10).
  std::string session;          ///< the id ("" if none)
  bool session_reused = false;  ///< the context came from the store (no prefill of it)
  bool session_stored = false;  ///< this request's context was stored for the next ones
  size_t kv_cold_bytes = 0;     ///< the context's cold tier
  double reselect_ms = 0;       ///< re-selecting the hot entries for this question
};

class Job {
 public:
  // Inputs, fixed before Scheduler::submit.
  CompletionRequest req;
  std::vector<int32_t> prompt;  ///< token ids (BOS included)
  int64_t question_tokens = 0;  ///< the prompt's question span (window=question presses; 0: unknown)
  /// Session requests (req.session): the prompt is context (its first context_tokens ids) +
  /// question; `fingerprint` identifies the context and press in the SessionStore.
  int64_t context_tokens = 0;
  std::string fingerprint;
  int64_t max_tokens = 0;  ///< resolved (default applied, capped by the context)
  PressPlanSummary plan;   ///< the press for this prompt length
  KvProjection kv;         ///< what admission reserves: kv.reserve()
  Clock::time_point submitted = Clock::now();

  /// Asks the scheduler to drop the job (client gone, shutdown). Safe from any thread.
  void cancel() { cancelled_.store(true, std::memory_order_relaxed); }
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

  // Scheduler side.
  /// Appends the text of one step (one token's piece, after the stop filter); a stream sends
  /// each piece as its own event.
  void push_text(const std::string& text) {
    if (text.empty()) return;
    {
      std::lock_guard lk(m_);
      pieces_.push_back(text);
    }
    cv_.notify_all();
  }
  void finish(JobResult r) {
    {
      std::lock_guard lk(m_);
      result_ = std::move(r);
      finished_ = true;
    }
    cv_.notify_all();
  }

  // Worker side. Waits up to `timeout` for text or the end; moves the text produced so far into
  // `out` (appending). Returns true once the job has finished and all its text was taken.
  bool take(std::string& out, std::chrono::milliseconds timeout) {
    std::vector<std::string> pieces;
    const bool done = take(pieces, timeout);
    for (const std::string& p : pieces) out += p;
    return done;
  }
  /// As take() above, but moves the pieces one by one into `out` (appending): a stream whose
  /// worker fell behind still sends one event per piece, as OpenAI's API does.
  bool take(std::vector<std::string>& out, std::chrono::milliseconds timeout) {
    std::unique_lock lk(m_);
    cv_.wait_for(lk, timeout, [this] { return finished_ || !pieces_.empty(); });
    for (std::string& p : pieces_) out.push_back(std::move(p));
    pieces_.clear();
    return finished_;
  }
  /// The result; call only after take() returned true.
  const JobResult& result() const { return result_; }

 private:
  std::atomic<bool> cancelled_{false};
  std::mutex m_;
  std::condition_variable cv_;
  std::vector<std::string> pieces_;
  bool finished_ = false;
  JobResult result_;
};

}  // namespace snapkv::server
