// The scheduler (src/server/scheduler.h) under concurrent clients, in one process: threads that
// stand for HTTP handlers tokenize, submit (retrying a full queue), stream, cancel and read the
// metrics while the scheduler thread batches their sequences with two-thread OpenMP teams; a
// stop with jobs queued and running ends every one of them. scripts/test.sh also runs these
// under ThreadSanitizer, where they check the locking between the handlers and the scheduler.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "server/admission.h"
#include "server/job.h"
#include "server/metrics.h"
#include "server/scheduler.h"
#include "snapkv/snapkv.h"
#include "test_util.h"

namespace snapkv::server {
namespace {

using namespace std::chrono_literals;

std::shared_ptr<const Engine> stories() {
  EngineOptions o;
  o.n_threads = 2;
  return Engine::load((test::shared_dir() / "models" / "stories260K.gguf").string(), o);
}

std::string story(int i, int repeats) {
  static const char* names[] = {"Lily", "Tom", "Sue", "Max", "Ben", "Amy", "Sam", "Mia"};
  std::string s;
  for (int r = 0; r < repeats; ++r) s += std::string("Once upon a time, ") + names[i % 8] + " had a red ball. ";
  return s;
}

/// A job as the server's handlers make it (server.cpp, make_job): tokenized on the calling
/// thread, the press planned and the KV bytes projected. Seeded sampling unless `greedy`.
std::shared_ptr<Job> make_job(const Engine& e, const std::string& prompt, int64_t max_tokens, const char* press,
                              bool greedy, uint64_t seed) {
  auto job = std::make_shared<Job>();
  job->req.prompt = prompt;
  job->req.ignore_eos = true;
  job->req.press = PressSpec::parse(press);
  if (greedy) job->req.sampling.temp = 0;
  job->req.sampling.seed = seed;
  job->prompt = e.tokenizer().encode(prompt, /*add_special=*/true, /*parse_special=*/false);
  const auto n = static_cast<int64_t>(job->prompt.size());
  job->max_tokens = max_tokens;
  job->plan = plan_press_spec(job->req.press, n);
  job->kv = project_kv(e.info(), KVType::F16, KVType::F16, n, max_tokens, job->plan);
  return job;
}

/// Submits `job`, retrying while the queue is full, then takes its text until it ends. With
/// `cancel_after` >= 0, cancels it once that many bytes of text arrived.
std::string run(Scheduler& s, const std::shared_ptr<Job>& job, long cancel_after = -1) {
  for (;;) {
    const Scheduler::Submit r = s.submit(job);
    if (r == Scheduler::Submit::Queued) break;
    EXPECT_EQ(r, Scheduler::Submit::QueueFull);
    if (r != Scheduler::Submit::QueueFull) return {};
    std::this_thread::sleep_for(200us);
  }
  std::string text;
  bool cancelled = false;
  while (!job->take(text, 50ms)) {
    if (cancel_after >= 0 && !cancelled && static_cast<long>(text.size()) >= cancel_after) {
      s.cancel(job);
      cancelled = true;
    }
  }
  return text;
}

SchedulerOptions options() {
  SchedulerOptions so;
  so.max_running = 3;
  so.max_queue = 2;
  so.max_batch_rows = 64;
  so.prefill_rows_per_step = 256;  // prompts take several steps: prefill chunks join decode rows
  so.n_ctx = 512;
  so.n_threads = 2;
  return so;
}

/// Expects the scheduler's gauges to say nothing runs and no KV bytes are held. A job counts out
/// before its client has the answer (GaugesCountAJobOutBeforeItsClientHasTheAnswer), so once every
/// client returned this holds at once; the bounded wait is only a margin.
void expect_idle(const Metrics& m) {
  for (int i = 0; i < 400 && (m.running() != 0 || m.kv_bytes_in_use() != 0); ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(m.running(), 0);
  EXPECT_EQ(m.kv_bytes_in_use(), 0u);
}

struct Case {
  int words;
  int64_t max_tokens;
  const char* press;
  bool greedy;
};

const Case kCases[] = {
    {4, 24, "none", true},
    {10, 20, "snapkv:budget=24,window=4", true},
    {6, 28, "tova:budget=20,window=4", false},
    {12, 16, "pyramidkv:budget=32,window=4", false},
    {3, 30, "none", false},
    {8, 18, "streamingllm:budget=20,window=8", true},
};

TEST(Scheduler, ConcurrentClientsGetWhatTheyGetAlone) {
  const auto e = stories();
  const int n = static_cast<int>(std::size(kCases));
  const auto job = [&](int i) {
    const Case& c = kCases[i];
    return make_job(*e, story(i, c.words), c.max_tokens, c.press, c.greedy, 1000 + static_cast<uint64_t>(i));
  };
  // A budget that holds two or three of the jobs: admission waits for bytes as well as slots, and
  // a client retrying a full queue reads the reserved bytes while the scheduler releases them.
  // Cancelled after its first text: 150 steps of >= 1 ms leave its client time to be scheduled
  // even on a loaded machine (without the delay, 200 steps of this tiny model took tens of ms).
  const int64_t cancelled_max = 150;
  auto cancelled = make_job(*e, story(1, 2), cancelled_max, "none", false, 7);
  size_t biggest = 0;
  for (int i = 0; i < n; ++i) biggest = std::max(biggest, job(i)->kv.reserve());
  SchedulerOptions so = options();
  so.kv_budget_bytes = biggest * 5 / 2;
  so.debug_step_delay_ms = 1;
  ASSERT_LE(cancelled->kv.reserve(), so.kv_budget_bytes) << "the cancelled job must fit the budget";
  Metrics metrics;
  Scheduler s(e, so, metrics);
  std::vector<std::string> alone;
  for (int i = 0; i < n; ++i) {
    const auto j = job(i);
    alone.push_back(run(s, j));
    ASSERT_EQ(j->result().finish_reason, "length") << i;
    ASSERT_EQ(j->result().n_generated_tokens, kCases[i].max_tokens) << i;
  }

  // Every client at once (more than max_running + max_queue: some retry a full queue), one more
  // that cancels its stream after the first text, and a reader of the metrics.
  std::vector<std::string> got(static_cast<size_t>(n));
  std::vector<std::shared_ptr<Job>> jobs(static_cast<size_t>(n));
  std::atomic<bool> done{false};
  std::vector<std::thread> clients;
  for (int i = 0; i < n; ++i)
    clients.emplace_back([&, i] {
      jobs[static_cast<size_t>(i)] = job(i);
      got[static_cast<size_t>(i)] = run(s, jobs[static_cast<size_t>(i)]);
    });
  clients.emplace_back([&] { run(s, cancelled, /*cancel_after=*/1); });
  std::thread reader([&] {
    size_t bytes = 0;
    while (!done.load()) {
      bytes += metrics.render().size();
      std::this_thread::sleep_for(1ms);
    }
    EXPECT_GT(bytes, 0u);
  });
  for (auto& t : clients) t.join();
  done.store(true);
  reader.join();

  for (int i = 0; i < n; ++i) {
    const JobResult& r = jobs[static_cast<size_t>(i)]->result();
    EXPECT_EQ(got[static_cast<size_t>(i)], alone[static_cast<size_t>(i)]) << "client " << i;
    EXPECT_EQ(r.finish_reason, "length") << "client " << i;
    EXPECT_EQ(r.n_generated_tokens, kCases[i].max_tokens) << "client " << i;
  }
  EXPECT_EQ(cancelled->result().finish_reason, "cancelled");
  EXPECT_LT(cancelled->result().n_generated_tokens, cancelled_max);
  expect_idle(metrics);
  const std::string text = metrics.render();
  EXPECT_NE(text.find("snapkv_requests_finished_total{reason=\"cancelled\"} 1"), std::string::npos) << text;
}

TEST(Scheduler, SubmittersAdmitTheirOwnJobsWhileOthersFinish) {
  // No queue (--max-queue 0): a job is taken only if it can start at once, so every admission
  // (slot and KV bytes) is made by the submitting thread, while the scheduler thread finishes
  // other jobs and returns theirs.
  const auto e = stories();
  SchedulerOptions so = options();
  so.max_queue = 0;
  so.max_running = 2;
  const auto job = [&](int t, int k) {
    return make_job(*e, story(t + k, 1), 1 + k % 3, "none", k % 2 == 0, 10 * t + k);
  };
  so.kv_budget_bytes = job(0, 2)->kv.reserve() * 3;
  Metrics metrics;
  Scheduler s(e, so, metrics);
  std::vector<std::thread> clients;
  std::atomic<int> n_done{0};
  for (int t = 0; t < 4; ++t)
    clients.emplace_back([&, t] {
      for (int k = 0; k < 8; ++k) {
        const auto j = job(t, k);
        run(s, j);
        EXPECT_EQ(j->result().finish_reason, "length");
        EXPECT_EQ(j->result().n_generated_tokens, j->max_tokens);
        ++n_done;
      }
    });
  for (auto& t : clients) t.join();
  EXPECT_EQ(n_done.load(), 32);
  expect_idle(metrics);
}

// A client that reads the gauges as soon as its answer ended (as server_hostile does through
// /metrics) never sees its own request still running nor its KV bytes still held: the scheduler
// counts a job out before it hands the job its result, not after the step it finished in.
TEST(Scheduler, GaugesCountAJobOutBeforeItsClientHasTheAnswer) {
  const auto e = stories();
  SchedulerOptions so = options();
  so.max_running = 1;
  Metrics metrics;
  Scheduler s(e, so, metrics);
  for (int k = 0; k < 12; ++k) {
    const auto j = make_job(*e, story(k, 1 + k % 3), 1 + k % 4, k % 2 ? "snapkv:budget=8,window=4" : "none", true, k);
    run(s, j);
    EXPECT_EQ(j->result().finish_reason, "length");
    EXPECT_EQ(metrics.running(), 0) << "job " << k;
    EXPECT_EQ(metrics.kv_bytes_in_use(), 0u) << "job " << k;
  }
}

/// Submits `a` then `b` and takes both to their end (bounded); both texts must be equal.
void run_both(Scheduler& s, const std::shared_ptr<Job>& a, const std::shared_ptr<Job>& b) {
  ASSERT_EQ(s.submit(a), Scheduler::Submit::Queued);
  ASSERT_EQ(s.submit(b), Scheduler::Submit::Queued);
  std::string ta, tb;
  bool a_done = false, b_done = false;
  for (int i = 0; i < 2000 && !(a_done && b_done); ++i) {
    if (!a_done) a_done = a->take(ta, 5ms);
    if (!b_done) b_done = b->take(tb, 5ms);
  }
  ASSERT_TRUE(a_done && b_done);
  EXPECT_EQ(ta, tb);
}

// The prefill budget goes to the prefilling jobs in admission order: of two equal prompts
// submitted together, the first gets its first token a whole prefill (~10 steps of >= 10 ms)
// before the second. An even split of the budget would give both their first token in one step.
TEST(Scheduler, PrefillBudgetGoesInAdmissionOrder) {
  const auto e = stories();
  Metrics metrics;
  SchedulerOptions so = options();
  so.prefill_rows_per_step = 100;
  so.debug_step_delay_ms = 10;
  Scheduler s(e, so, metrics);
  const auto a = make_job(*e, story(0, 20), 2, "none", true, 1), b = make_job(*e, story(0, 20), 2, "none", true, 2);
  const auto steps = static_cast<int64_t>(a->prompt.size()) * e->info().n_layer / so.prefill_rows_per_step;
  ASSERT_GE(steps, 8);
  b->submitted = a->submitted;  // both TTFTs from one instant: b was tokenized after a
  ASSERT_NO_FATAL_FAILURE(run_both(s, a, b));
  EXPECT_GE(b->result().ttft_ms - a->result().ttft_ms, static_cast<double>(steps - 2) * so.debug_step_delay_ms)
      << "first tokens at " << a->result().ttft_ms << " and " << b->result().ttft_ms << " ms, " << steps
      << " steps per prefill";
  expect_idle(metrics);
}

// A request keeps its prefill peak reserved only while it prefills: with a budget of one
// compressed request's peak plus its final size, the second request starts as soon as the first
// has compressed its prompt (while the first still decodes), not when the first ends.
TEST(Scheduler, ReservationShrinksToTheFinalSizeAfterPrefill) {
  const auto e = stories();
  Metrics metrics;
  SchedulerOptions so = options();
  so.debug_step_delay_ms = 2;
  const auto job = [&](uint64_t seed) {
    return make_job(*e, story(0, 20), 8, "snapkv:budget=24,window=4", true, seed);
  };
  const auto a = job(1), b = job(2);
  ASSERT_GT(a->kv.prefill_peak, a->kv.final_bytes);
  so.kv_budget_bytes = a->kv.reserve() + a->kv.final_bytes;
  ASSERT_LT(so.kv_budget_bytes, 2 * a->kv.reserve());  // the two peaks never fit at once
  Scheduler s(e, so, metrics);
  ASSERT_NO_FATAL_FAILURE(run_both(s, a, b));
  EXPECT_EQ(metrics.running_peak(), 2);
  EXPECT_EQ(a->result().kv_cache_bytes_reserved, a->kv.reserve());  // what admission reserved
  EXPECT_LE(a->result().kv_cache_bytes, a->kv.final_bytes);
  expect_idle(metrics);
}

TEST(Scheduler, StopEndsQueuedAndRunningJobs) {
  const auto e = stories();
  Metrics metrics;
  SchedulerOptions so = options();
  so.max_running = 2;
  so.max_queue = 8;
  so.debug_step_delay_ms = 2;  // 400 tokens take far longer than the test waits
  auto s = std::make_unique<Scheduler>(e, so, metrics);
  const auto job = [&](int i) { return make_job(*e, story(i, 3), 400, "none", i % 2 == 0, 50 + i); };
  std::vector<std::shared_ptr<Job>> jobs;
  std::vector<std::thread> clients;
  const auto start = [&](int i) {
    jobs.push_back(job(i));
    ASSERT_EQ(s->submit(jobs.back()), Scheduler::Submit::Queued);
    clients.emplace_back([j = jobs.back()] {
      std::string text;
      while (!j->take(text, 50ms)) {
      }
    });
  };
  for (int i = 0; i < 2; ++i) start(i);
  for (int i = 0; i < 400 && metrics.running() < 2; ++i) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(metrics.running(), 2);

  // A queued job cancelled before it is admitted is dropped without running.
  auto dropped = job(7);
  ASSERT_EQ(s->submit(dropped), Scheduler::Submit::Queued);
  s->cancel(dropped);
  std::string text;
  for (int i = 0; i < 100 && !dropped->take(text, 50ms); ++i) {
  }
  ASSERT_TRUE(dropped->take(text, 0ms));
  EXPECT_EQ(dropped->result().finish_reason, "cancelled");
  EXPECT_EQ(dropped->result().n_generated_tokens, 0);
  EXPECT_EQ(text, "");

  for (int i = 2; i < 6; ++i) start(i);  // queued behind the two running ones
  std::this_thread::sleep_for(20ms);
  s->stop(Clock::now() + 30ms);  // from a thread other than the clients'
  for (auto& t : clients) t.join();
  for (size_t i = 0; i < jobs.size(); ++i) {
    const JobResult& r = jobs[i]->result();
    if (i < 2) {
      EXPECT_EQ(r.finish_reason, "cancelled") << i;  // running at the deadline
    } else {
      EXPECT_EQ(r.finish_reason, "error") << i;  // queued at stop(): 503
      EXPECT_EQ(r.error_status, 503) << i;
    }
  }
  EXPECT_EQ(s->submit(job(9)), Scheduler::Submit::ShuttingDown);
  expect_idle(metrics);
  s.reset();  // the thread has exited: the destructor's stop() joins nothing
}

// A client that goes away while its job waits frees its --max-queue slot wherever the job sits in
// the queue (only the head's was freed before: a later request got 429 queue_full), and the job
// counts as a finished, cancelled request; jobs refused at shutdown count too.
TEST(Scheduler, CancelledQueuedJobsFreeTheirQueueSlots) {
  const auto e = stories();
  Metrics metrics;
  SchedulerOptions so = options();
  so.max_running = 1;
  so.max_queue = 2;
  so.debug_step_delay_ms = 2;  // the running job outlasts the test's waits
  auto s = std::make_unique<Scheduler>(e, so, metrics);
  const auto job = [&](int i) { return make_job(*e, story(i, 3), 400, "none", true, 70 + i); };
  const auto running = job(0);
  ASSERT_EQ(s->submit(running), Scheduler::Submit::Queued);
  for (int i = 0; i < 400 && metrics.running() < 1; ++i) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(metrics.running(), 1);
  const auto head = job(1), behind = job(2);
  ASSERT_EQ(s->submit(head), Scheduler::Submit::Queued);
  ASSERT_EQ(s->submit(behind), Scheduler::Submit::Queued);
  EXPECT_EQ(s->submit(job(3)), Scheduler::Submit::QueueFull);
  s->cancel(behind);  // not at the head: the head still waits for the running job
  std::string text;
  for (int i = 0; i < 100 && !behind->take(text, 50ms); ++i) {
  }
  ASSERT_TRUE(behind->take(text, 0ms));
  EXPECT_EQ(behind->result().finish_reason, "cancelled");
  EXPECT_EQ(behind->result().n_generated_tokens, 0);
  const auto next = job(4);
  EXPECT_EQ(s->submit(next), Scheduler::Submit::Queued);  // was QueueFull
  EXPECT_NE(metrics.render().find("snapkv_requests_finished_total{reason=\"cancelled\"} 1\n"), std::string::npos)
      << metrics.render();
  s->stop(Clock::now());
  for (const auto& j : {running, head, next})
    while (!j->take(text, 50ms)) {
    }
  EXPECT_EQ(head->result().error_status, 503);
  EXPECT_EQ(next->result().error_status, 503);
  // The two refused at shutdown count as errors; the running one was cancelled at the deadline.
  EXPECT_NE(metrics.render().find("snapkv_requests_finished_total{reason=\"error\"} 2\n"), std::string::npos)
      << metrics.render();
  EXPECT_NE(metrics.render().find("snapkv_requests_finished_total{reason=\"cancelled\"} 2\n"), std::string::npos)
      << metrics.render();
  s.reset();
}

/// A session job (server.cpp's make_job for "session"): context + question, the press planned on
/// the context, the question appended like generated tokens.
std::shared_ptr<Job> session_job(const Engine& e, const std::string& id, const std::vector<int32_t>& context,
                                 const std::vector<int32_t>& question, const char* press) {
  auto job = std::make_shared<Job>();
  job->req.session = id;
  job->req.ignore_eos = true;
  job->req.press = PressSpec::parse(press);
  job->req.sampling.temp = 0;
  job->prompt = context;
  job->prompt.insert(job->prompt.end(), question.begin(), question.end());
  job->context_tokens = static_cast<int64_t>(context.size());
  job->fingerprint = std::string(press) + "|" + std::to_string(context.size()) + "|" + std::to_string(context[1]);
  job->max_tokens = 12;
  job->plan = plan_press_spec(job->req.press, job->context_tokens);
  job->kv = project_kv(e.info(), KVType::F16, KVType::F16, job->context_tokens,
                       job->max_tokens + static_cast<int64_t>(question.size()), job->plan);
  return job;
}

TEST(Scheduler, SessionRequestsReuseTheCompressedContextAndAnswerAsTheLibrary) {
  const auto e = stories();
  Metrics m;
  SchedulerOptions so = options();
  so.max_queue = 8;
  Scheduler s(e, so, m);
  const Tokenizer& tok = e->tokenizer();
  const std::vector<int32_t> doc = tok.encode(story(0, 8), true, false);
  const std::vector<std::vector<int32_t>> questions = {tok.encode(" Who had the ball?", false, false),
                                                       tok.encode(" What color was it?", false, false)};
  const char* press = "snapkv:budget=24,window=4";
  // The library's answers: one compressed document with an int8 cold tier, each question on a
  // fork of it, re-selecting.
  std::vector<std::string> want;
  {
    Workspace ws(*e);
    SequenceOptions sq;
    sq.n_ctx = so.n_ctx;
    sq.cold_tier = parse_cold_tier("int8");
    auto d = e->new_sequence(sq);
    PrefillOptions po;
    po.press = PressSpec::parse(press);
    e->prefill(*d, doc, po, ws);
    for (const auto& q : questions) {
      auto f = d->fork();
      GenerateOptions go;
      go.n_predict = 12;
      go.ignore_eos = true;
      go.sampling.temp = 0;
      go.reselect = true;
      want.push_back(generate_answer(*e, *f, q, go, ws).text);
    }
  }
  // Two clients at once on two sessions, then follow-ups: the first request of each session builds
  // and stores its context, the later ones fork it.
  std::vector<std::string> got(4);
  std::vector<std::shared_ptr<Job>> jobs(4);
  {
    std::thread a([&] { got[0] = run(s, jobs[0] = session_job(*e, "a", doc, questions[0], press)); });
    std::thread b([&] { got[1] = run(s, jobs[1] = session_job(*e, "b", doc, questions[1], press)); });
    a.join();
    b.join();
  }
  got[2] = run(s, jobs[2] = session_job(*e, "a", doc, questions[1], press));
  got[3] = run(s, jobs[3] = session_job(*e, "b", doc, questions[0], press));
  EXPECT_EQ(got[0], want[0]);
  EXPECT_EQ(got[1], want[1]);
  EXPECT_EQ(got[2], want[1]);
  EXPECT_EQ(got[3], want[0]);
  for (int i = 0; i < 4; ++i) {
    const JobResult& r = jobs[static_cast<size_t>(i)]->result();
    EXPECT_EQ(r.finish_reason, "length") << i << " " << r.error_message;
    EXPECT_EQ(r.session_reused, i >= 2) << i;
    EXPECT_EQ(r.session_stored, i < 2) << i;
    EXPECT_GT(r.kv_cold_bytes, 0u) << i;
    EXPECT_TRUE(r.compressed) << i;
    // A reused context was compressed by an earlier request: this one reports its own times only
    // (it reported the stored context's prefill and compression times, prefill_ms > ttft_ms).
    if (i >= 2)
      EXPECT_EQ(r.compression_ms, 0.0) << i;
    else
      EXPECT_GT(r.compression_ms, 0.0) << i;
    EXPECT_GT(r.prefill_ms, 0.0) << i;
    EXPECT_LE(r.prefill_ms, r.ttft_ms) << i;
  }
  const SessionStoreStats st = s.sessions().stats();
  EXPECT_EQ(st.entries, 2u);
  EXPECT_EQ(st.hits, 2u);
  expect_idle(m);
}

}  // namespace
}  // namespace snapkv::server
