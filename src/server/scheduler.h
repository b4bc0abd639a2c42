// snapkv server: Scheduler — the request queue and the one thread that owns the Workspace and
// runs Engine::step in a loop: the decode rows of every running sequence plus row-budgeted
// prefill chunks of newly admitted ones (continuous batching). Admission is by projected KV
// bytes against the budget, in FIFO order (docs/design.md, "Server").
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "server/admission.h"
#include "server/job.h"
#include "server/metrics.h"
#include "server/session_store.h"
#include "snapkv/cold_tier.h"
#include "snapkv/engine.h"
#include "snapkv/kv_type.h"
#include "snapkv/workspace.h"

namespace snapkv::server {

struct SchedulerOptions {
  size_t kv_budget_bytes = 0;    ///< --kv-memory-budget (0: unlimited)
  size_t max_queue = 64;         ///< --max-queue: jobs waiting for admission at most
  int64_t max_batch_rows = 512;  ///< --max-batch-rows: rows of one block call (workspace max_rows)
  int64_t max_running = 64;      ///< sequences admitted at once at most (< max_batch_rows)
  int64_t prefill_rows_per_step =
      4096;           ///< token-layers of prefill work per step (given to the prefilling jobs in admission order)
  int64_t n_ctx = 0;  ///< per sequence (0: the model's)
  KVType kv_type = KVType::F16;     ///< --kv-type: keys (and values unless kv_type_v)
  std::optional<KVType> kv_type_v;  ///< --kv-type-v: values, when not kv_type
  int n_threads = 0;                ///< workspace threads (0: the engine's)
  int debug_step_delay_ms = 0;      ///< tests: sleep this long after every step (makes queues observable)
  /// --session-budget: bytes (hot KV + cold tier) the stored session contexts may hold; 0 = no
  /// sessions. Not part of kv_budget_bytes: stored contexts are idle, not running requests.
  size_t session_budget_bytes = size_t{1} << 30;
  /// --session-cold-tier: the cold tier of a compressed session context (int8 in RAM by default).
  ColdTierOptions session_cold_tier = [] {
    ColdTierOptions c;
    c.enabled = true;
    return c;
  }();
};

class Scheduler {
 public:
  enum class Submit { Queued, QueueFull, TooLarge, ShuttingDown };

  /// Starts the scheduler thread. Throws snapkv::Error for bad options (from the Workspace).
  Scheduler(std::shared_ptr<const Engine> engine, const SchedulerOptions& opt, Metrics& metrics);
  /// Stops (cancelling what is left) and joins the thread.
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  /// Queues `job` (its inputs filled in). QueueFull: max_queue jobs already wait; TooLarge: its
  /// reservation exceeds the whole budget; ShuttingDown: stop() was called.
  Submit submit(const std::shared_ptr<Job>& job);
  /// Cancels `job` and wakes the scheduler (a job cancelled while queued is dropped at once).
  void cancel(const std::shared_ptr<Job>& job);
  /// Stops admitting; queued jobs end with 503; running jobs may finish until `deadline`, then
  /// they are cancelled. Returns when the thread has exited.
  void stop(Clock::time_point deadline);

  size_t kv_budget() const { return opt_.kv_budget_bytes; }
  /// The stored session contexts (thread-safe).
  const SessionStore& sessions() const { return sessions_; }

 private:
  struct Running;
  void loop();
  void admit_locked();
  /// Under m_: ends a job that never ran (cancelled while queued, or refused at shutdown) with
  /// `r` and counts it in the metrics as a finished request.
  void finish_queued_locked(const std::shared_ptr<Job>& job, JobResult r);
  /// Under m_: ends every queued job whose client has gone, wherever it waits in the queue, so
  /// that it holds no --max-queue slot.
  void drop_cancelled_locked();
  void finish(Running& r, std::string reason, int error_status = 0, std::string error = {});
  /// Starts a session request's prefill: the question on a fork of the stored context if there
  /// is one, else the context itself (stored when done, then the question follows).
  void begin_session(Running& r);
  /// A session request's context prefill is done: store a copy, then queue the question.
  void context_done(Running& r);
  /// Returns freed heap memory to the OS when a sequence was freed or compressed since the last
  /// time: at once when nothing runs (`idle`), else at most once per kTrimInterval.
  void maybe_trim_heap(bool idle);

  std::shared_ptr<const Engine> engine_;
  SchedulerOptions opt_;
  Metrics& metrics_;
  SessionStore sessions_;

  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::deque<std::unique_ptr<Running>> admitted_;  // handed from admit_locked to the loop
  KvBudget budget_;
  int64_t n_running_ = 0;  // admitted and not finished (under m_)
  bool stopping_ = false;
  Clock::time_point deadline_{};
  std::unique_ptr<Workspace> ws_;
  bool trim_pending_ = false;  // scheduler thread only
  Clock::time_point last_trim_{};
  std::thread thread_;
};

}  // namespace snapkv::server
