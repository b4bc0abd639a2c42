// snapkv server: the scheduler loop (see scheduler.h and docs/design.md, "Server").
#include "server/scheduler.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <algorithm>
#include <exception>
#include <new>
#include <vector>

#include "snapkv/batch.h"
#include "snapkv/cold_tier.h"
#include "snapkv/error.h"
#include "snapkv/sampling.h"
#include "snapkv/sequence.h"
#include "snapkv/stop_filter.h"
#include "snapkv/tokenizer.h"
#include "snapkv/workspace.h"

namespace snapkv::server {

namespace {

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// While sequences run, malloc_trim at most this often (it walks every arena's free lists).
constexpr auto kTrimInterval = std::chrono::milliseconds(500);

}  // namespace

/// A job admitted to the engine: its sequence and the state of its generation.
struct Scheduler::Running {
  std::shared_ptr<Job> job;
  std::unique_ptr<Sequence> seq;
  Sampler sampler;
  TokenStreamDecoder decoder;
  StopFilter filter;
  size_t reserved = 0;           // KV bytes reserved now (the final size once the prefill is done)
  size_t reserved_admitted = 0;  // what admission reserved (max of the prefill peak and the final size)
  bool started = false;          // begin_prefill called
  bool decoding = false;         // prefill done
  int32_t last = -1;             // last sampled token (the next decode row)
  int64_t n_generated = 0;
  Clock::time_point last_token_at{};
  double ttft_ms = -1;
  bool done = false;
  bool building_context = false;  // a session request prefilling its context (the question comes next)
  bool session_reused = false;
  bool session_stored = false;
  // A reused session's fork carries the stored context's prefill and compression times in its
  // stats; this request reports (and counts in the metrics) only what it spent itself.
  double prefill_ms_before = 0;
  double compression_ms_before = 0;

  Running(std::shared_ptr<Job> j, std::unique_ptr<Sequence> s, const Tokenizer& tok, size_t bytes)
      : job(std::move(j)),
        seq(std::move(s)),
        sampler(job->req.sampling),
        decoder(tok),
        filter(job->req.stop),
        reserved(bytes),
        reserved_admitted(bytes) {}
};

Scheduler::Scheduler(std::shared_ptr<const Engine> engine, const SchedulerOptions& opt, Metrics& metrics)
    : engine_(std::move(engine)),
      opt_(opt),
      metrics_(metrics),
      sessions_(opt.session_budget_bytes),
      budget_(opt.kv_budget_bytes) {
  if (opt_.max_running < 1 || opt_.max_running >= opt_.max_batch_rows)
    throw Error(fmt::format("scheduler: max_running {} must be in [1, max_batch_rows {})", opt_.max_running,
                            opt_.max_batch_rows));
  metrics_.set_budget(opt_.kv_budget_bytes);
  // The workspace is made (and checked) here; only the scheduler thread uses it.
  ws_ = std::make_unique<Workspace>(*engine_, WorkspaceOptions{.n_threads = opt_.n_threads,
                                                               .max_rows = opt_.max_batch_rows,
                                                               .prefill_attention = std::nullopt});  // the engine's
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() { stop(Clock::now()); }

Scheduler::Submit Scheduler::submit(const std::shared_ptr<Job>& job) {
  const size_t bytes = job->kv.reserve();
  {
    std::lock_guard lk(m_);
    if (stopping_) return Submit::ShuttingDown;
    if (!budget_.could_fit(bytes)) return Submit::TooLarge;
    drop_cancelled_locked();  // abandoned jobs do not count against --max-queue
    if (queue_.size() >= opt_.max_queue) {
      // A full queue still lets a job in that can start right now (nothing waits before it).
      const bool now = queue_.empty() && n_running_ < opt_.max_running && budget_.could_fit(bytes) &&
                       (opt_.kv_budget_bytes == 0 || budget_.reserved() + bytes <= opt_.kv_budget_bytes);
      if (!now) return Submit::QueueFull;
    }
    queue_.push_back(job);
    admit_locked();
    metrics_.set_counts(n_running_, static_cast<int64_t>(queue_.size()));
  }
  cv_.notify_all();
  return Submit::Queued;
}

void Scheduler::cancel(const std::shared_ptr<Job>& job) {
  job->cancel();
  cv_.notify_all();
}

void Scheduler::stop(Clock::time_point deadline) {
  {
    std::lock_guard lk(m_);
    if (!stopping_) {
      stopping_ = true;
      deadline_ = deadline;
    } else {
      deadline_ = std::min(deadline_, deadline);
    }
  }
  cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void Scheduler::finish_queued_locked(const std::shared_ptr<Job>& job, JobResult r) {
  r.n_prompt_tokens = static_cast<int64_t>(job->prompt.size());
  // No prompt token of it was prefilled: the counter of prompt tokens stays as it is.
  metrics_.request_finished(r.finish_reason, 0, 0, -1.0, seconds_between(job->submitted, Clock::now()));
  job->finish(std::move(r));
}

void Scheduler::drop_cancelled_locked() {
  std::vector<std::shared_ptr<Job>> dropped;
  std::erase_if(queue_, [&dropped](const std::shared_ptr<Job>& j) {
    if (!j->cancelled()) return false;
    dropped.push_back(j);
    return true;
  });
  if (dropped.empty()) return;
  // The gauges first: a client answered "cancelled" never sees its request still waiting.
  metrics_.set_counts(n_running_, static_cast<int64_t>(queue_.size()));
  for (auto& j : dropped) {
    JobResult r;
    r.finish_reason = "cancelled";
    finish_queued_locked(j, std::move(r));
  }
}

// Under m_: moves queued jobs into admitted_ in FIFO order while the head fits.
void Scheduler::admit_locked() {
  drop_cancelled_locked();
  while (!queue_.empty()) {
    const std::shared_ptr<Job>& head = queue_.front();
    if (n_running_ >= opt_.max_running) break;
    const size_t bytes = head->kv.reserve();
    if (!budget_.try_reserve(bytes)) break;
    SequenceOptions so;
    so.n_ctx = opt_.n_ctx;
    so.kv_type = opt_.kv_type;
    so.kv_type_v = opt_.kv_type_v;
    if (!head->req.session.empty() && head->plan.compress) so.cold_tier = opt_.session_cold_tier;
    admitted_.push_back(std::make_unique<Running>(head, engine_->new_sequence(so), engine_->tokenizer(), bytes));
    ++n_running_;
    queue_.pop_front();
  }
}

void Scheduler::finish(Running& r, std::string reason, int error_status, std::string error) {
  if (r.done) return;
  r.done = true;
  if (reason != "error" && reason != "cancelled") r.job->push_text(r.filter.rest());
  JobResult res;
  res.finish_reason = std::move(reason);
  res.error_status = error_status;
  res.error_message = std::move(error);
  res.n_prompt_tokens = static_cast<int64_t>(r.job->prompt.size());
  res.n_generated_tokens = r.n_generated;
  const SequenceStats& st = r.seq->stats();
  res.kv_cache_bytes = st.kv_cache_bytes;
  res.kv_cache_bytes_full = st.kv_cache_bytes_full;
  res.peak_kv_cache_bytes = st.peak_kv_cache_bytes;
  res.kv_cache_bytes_reserved = r.reserved_admitted;
  res.press = r.job->plan.spec;
  res.compressed = st.compressed;
  res.compression_note = r.job->plan.note;
  res.window = st.window;
  // (A fork that failed alone was reset: its times start again from 0.)
  res.compression_ms = std::max(0.0, st.compression_ms - r.compression_ms_before);
  res.prefill_ms = std::max(0.0, st.prefill_ms - r.prefill_ms_before);
  res.session = r.job->req.session;
  res.session_reused = r.session_reused;
  res.session_stored = r.session_stored;
  res.kv_cold_bytes = st.kv_cold_bytes;
  res.reselect_ms = st.reselect_ms;
  const auto now = Clock::now();
  res.ttft_ms = r.ttft_ms;
  metrics_.request_finished(res.finish_reason, res.n_prompt_tokens, res.n_generated_tokens,
                            res.ttft_ms >= 0 ? res.ttft_ms / 1000.0 : -1.0, seconds_between(r.job->submitted, now));
  r.seq.reset();  // the KV cache is freed now
  trim_pending_ = true;
  {
    std::lock_guard lk(m_);
    budget_.release(r.reserved);
    --n_running_;
    // Before the answer goes out: a client that reads /metrics once answered sees it gone.
    metrics_.sequence_released(n_running_, res.kv_cache_bytes, budget_.reserved());
  }
  r.job->finish(std::move(res));
}

// glibc keeps freed memory in its arenas, resident, until malloc_trim: a finished request's KV
// cache, and the full-length per-layer copies a compression frees (+2..+25% RSS, issue 7). (KV
// buffers of 256 KiB or more are memory mappings, returned to the kernel when freed:
// kv/row_buffer.h.)
void Scheduler::begin_session(Running& r) {
  const Job& job = *r.job;
  const auto ctx = static_cast<size_t>(job.context_tokens);
  const std::span<const int32_t> all(job.prompt);
  if (std::shared_ptr<const Sequence> doc = sessions_.find(job.req.session, job.fingerprint)) {
    r.seq = doc->fork();  // shares the cold tier; copies the compressed hot entries
    r.session_reused = true;
    r.prefill_ms_before = r.seq->stats().prefill_ms;
    r.compression_ms_before = r.seq->stats().compression_ms;
    PrefillOptions po;
    po.reselect = r.seq->cold_tier().enabled;
    r.seq->begin_prefill(all.subspan(ctx), po);
    return;
  }
  PrefillOptions po;
  po.press = job.req.press;
  r.seq->begin_prefill(all.first(ctx), po);
  r.building_context = true;
}

void Scheduler::context_done(Running& r) {
  const Job& job = *r.job;
  r.building_context = false;
  r.session_stored = sessions_.put(job.req.session, job.fingerprint, std::shared_ptr<const Sequence>(r.seq->fork()));
  if (r.seq->stats().compressed) trim_pending_ = true;
  PrefillOptions po;
  po.reselect = r.seq->cold_tier().enabled;
  r.seq->begin_prefill(std::span<const int32_t>(job.prompt).subspan(static_cast<size_t>(job.context_tokens)), po);
}

void Scheduler::maybe_trim_heap(bool idle) {
  if (!trim_pending_) return;
  const auto now = Clock::now();
  if (!idle && now - last_trim_ < kTrimInterval) return;
  trim_pending_ = false;
#ifdef __GLIBC__
  malloc_trim(0);
  last_trim_ = Clock::now();
  metrics_.heap_trim(seconds_between(now, last_trim_));
#else
  last_trim_ = now;
#endif
}

void Scheduler::loop() {
  std::vector<std::unique_ptr<Running>> running;
  Batch batch;
  std::vector<Running*> rows, items;
  const Tokenizer& tok = engine_->tokenizer();
  Workspace& ws = *ws_;
  size_t in_use = 0;  // KV bytes held by the running sequences after the last step
  for (;;) {
    maybe_trim_heap(running.empty());
    bool past_deadline = false;
    {
      std::unique_lock lk(m_);
      admit_locked();
      if (stopping_ && !queue_.empty()) {
        std::deque<std::shared_ptr<Job>> refused;
        refused.swap(queue_);
        metrics_.set_counts(n_running_, 0);
        for (auto& j : refused) {
          JobResult r;
          r.finish_reason = "error";
          r.error_status = 503;
          r.error_message = "the server is shutting down";
          finish_queued_locked(j, std::move(r));
        }
      }
      while (!admitted_.empty()) {
        running.push_back(std::move(admitted_.front()));
        admitted_.pop_front();
      }
      if (running.empty()) {
        in_use = 0;
        metrics_.set_state(n_running_, static_cast<int64_t>(queue_.size()), 0, budget_.reserved());
        if (stopping_) break;
        cv_.wait(lk, [this] { return stopping_ || !admitted_.empty() || !queue_.empty(); });
        continue;
      }
      past_deadline = stopping_ && Clock::now() >= deadline_;
      metrics_.set_state(n_running_, static_cast<int64_t>(queue_.size()), in_use, budget_.reserved());
    }

    // Drop what was cancelled; start new prefills.
    for (auto& r : running) {
      if (r->job->cancelled() || past_deadline) {
        finish(*r, "cancelled");
        continue;
      }
      if (!r->started) {
        PrefillOptions po;
        po.press = r->job->req.press;
        po.question_tokens = r->job->question_tokens;
        try {
          if (r->job->req.session.empty()) {
            r->seq->begin_prefill(r->job->prompt, po);
          } else {
            begin_session(*r);
          }
          r->started = true;
        } catch (const ColdTierIOError& e) {  // the server's --session-cold-tier directory
          spdlog::error("session cold tier: {}", e.what());
          finish(*r, "error", 500, e.what());
        } catch (const std::exception& e) {
          finish(*r, "error", 400, e.what());
        }
      }
    }
    std::erase_if(running, [](const std::unique_ptr<Running>& r) { return r->done; });
    if (running.empty()) continue;

    // One step: every decoding sequence's row, plus the prefill budget given in admission order
    // (the oldest prefill takes what it needs, the next one the rest, ...): first tokens come
    // one prompt after another instead of all at the end of a wave.
    batch.clear();
    rows.clear();
    items.clear();
    int64_t prefill_left = opt_.prefill_rows_per_step;
    for (auto& r : running) {
      if (r->decoding) {
        if (r->seq->n_past() >= r->seq->n_ctx()) {
          finish(*r, "length");
          continue;
        }
        batch.add(*r->seq, r->last, true);
        rows.push_back(r.get());
      } else if (prefill_left > 0) {
        const int64_t want = r->seq->prefill_rows_left();
        const int64_t give = std::min(want, prefill_left);
        batch.add_prefill(*r->seq, give == want ? 0 : give);  // 0: to the end
        items.push_back(r.get());
        prefill_left -= give;
      }
    }
    if (batch.n_rows() + batch.n_prefills() > 0) {
      try {
        engine_->step(batch, ws);
        metrics_.steps(batch.n_rows(), batch.n_prefills());
      } catch (const std::bad_alloc&) {
        for (Running* r : rows) finish(*r, "error", 503, "out of memory in the engine step");
        for (Running* r : items) finish(*r, "error", 503, "out of memory in the engine step");
      } catch (const std::exception& e) {
        spdlog::error("engine step failed: {}", e.what());
        for (Running* r : rows) finish(*r, "error", 500, fmt::format("engine step failed: {}", e.what()));
        for (Running* r : items) finish(*r, "error", 500, fmt::format("engine step failed: {}", e.what()));
      }
    }

    if (opt_.debug_step_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(opt_.debug_step_delay_ms));

    // Sample and stream: decode rows, then finished prefills.
    const auto on_logits = [&](Running& r, std::span<const float> logits) {
      int32_t t = 0;
      try {
        t = r.sampler.sample(logits);
      } catch (const std::exception& e) {
        finish(r, "error", 500, fmt::format("sampling failed: {}", e.what()));
        return;
      }
      const auto now = Clock::now();
      if (r.n_generated == 0) {
        r.ttft_ms = std::chrono::duration<double, std::milli>(now - r.job->submitted).count();
      } else {
        metrics_.inter_token(seconds_between(r.last_token_at, now));
      }
      r.last_token_at = now;
      if (!r.job->req.ignore_eos && tok.is_eog(t)) {
        r.job->push_text(r.filter.push(r.decoder.flush()));
        finish(r, "stop");
        return;
      }
      ++r.n_generated;
      r.last = t;
      r.job->push_text(r.filter.push(r.decoder.push(t)));
      if (r.filter.stopped()) {
        finish(r, "stop");
        return;
      }
      if (r.n_generated >= r.job->max_tokens) {
        r.job->push_text(r.filter.push(r.decoder.flush()));
        finish(r, r.filter.stopped() ? "stop" : "length");
      }
    };
    for (size_t i = 0; i < rows.size(); ++i)
      if (!rows[i]->done) on_logits(*rows[i], batch.logits(static_cast<int>(i)));
    for (size_t i = 0; i < items.size(); ++i) {
      Running& r = *items[i];
      if (r.done) continue;
      if (batch.prefills()[i].failure) {
        // This request's own failure (its cold tier's disk, its press); the others went on.
        const std::string& err = batch.prefill_error(static_cast<int>(i));
        spdlog::error("prefill failed: {}", err);
        finish(r, "error", 500, fmt::format("prefill failed: {}", err));
        continue;
      }
      if (!batch.prefill_done(static_cast<int>(i))) continue;
      if (r.building_context) {
        try {
          context_done(r);
        } catch (const std::bad_alloc&) {
          finish(r, "error", 503, "out of memory storing the session");
        } catch (const std::exception& e) {
          finish(r, "error", 500, fmt::format("session: {}", e.what()));
        }
        continue;
      }
      r.decoding = true;
      // Its prefill peak is behind it: from now on it holds at most its final size (prompt after
      // compression + max_tokens), so the rest of its reservation goes back to the budget.
      if (r.job->kv.final_bytes < r.reserved) {
        std::lock_guard lk(m_);
        budget_.release(r.reserved - r.job->kv.final_bytes);
        r.reserved = r.job->kv.final_bytes;
      }
      metrics_.compression((r.seq->stats().compression_ms - r.compression_ms_before) / 1000.0);
      if (r.seq->stats().compressed) trim_pending_ = true;
      on_logits(r, r.seq->prefill_logits());
    }
    std::erase_if(running, [](const std::unique_ptr<Running>& r) { return r->done; });

    in_use = 0;
    for (auto& r : running) in_use += r->seq->stats().kv_cache_bytes;
    std::lock_guard lk(m_);
    metrics_.set_state(n_running_, static_cast<int64_t>(queue_.size()), in_use, budget_.reserved());
  }
  std::lock_guard lk(m_);
  metrics_.set_state(0, 0, 0, budget_.reserved());
}

}  // namespace snapkv::server
