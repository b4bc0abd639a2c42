// snapkv server: metrics (see metrics.h).
#include "server/metrics.h"

#include <fmt/format.h>

#include <algorithm>

namespace snapkv::server {

namespace {

template <class K>
void bump(std::vector<std::pair<K, int64_t>>& v, const K& key) {
  for (auto& [k, n] : v)
    if (k == key) {
      ++n;
      return;
    }
  v.emplace_back(key, 1);
}

void header(std::string& out, const std::string& name, const std::string& help, const char* type) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  const auto it = std::lower_bound(bounds_.begin(), bounds_.end(), v);
  ++counts_[static_cast<size_t>(it - bounds_.begin())];
  sum_ += v;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help) const {
  header(out, name, help, "histogram");
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cum);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, count_, name, sum_, name, count_);
}

Metrics::Metrics()
    : ttft_({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      itl_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}),
      e2e_({0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}),
      compression_({0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5}) {}

void Metrics::set_state(int64_t running, int64_t waiting, size_t kv_bytes_in_use, size_t kv_bytes_reserved) {
  std::lock_guard lk(m_);
  running_ = running;
  running_peak_ = std::max(running_peak_, running);
  waiting_ = waiting;
  kv_in_use_ = kv_bytes_in_use;
  kv_reserved_ = kv_bytes_reserved;
  kv_peak_ = std::max(kv_peak_, kv_bytes_in_use);
}

void Metrics::set_counts(int64_t running, int64_t waiting) {
  std::lock_guard lk(m_);
  running_ = running;
  running_peak_ = std::max(running_peak_, running);
  waiting_ = waiting;
}

void Metrics::sequence_released(int64_t running, size_t kv_bytes, size_t kv_bytes_reserved) {
  std::lock_guard lk(m_);
  running_ = running;
  kv_in_use_ = running == 0 ? 0 : kv_in_use_ - std::min(kv_in_use_, kv_bytes);
  kv_reserved_ = kv_bytes_reserved;
}

void Metrics::set_budget(size_t kv_budget_bytes) {
  std::lock_guard lk(m_);
  kv_budget_ = kv_budget_bytes;
}

void Metrics::request_finished(const std::string& finish_reason, int64_t prompt_tokens, int64_t generated_tokens,
                               double ttft_s, double e2e_s) {
  std::lock_guard lk(m_);
  bump(finished_, finish_reason);
  prompt_tokens_ += prompt_tokens;
  generated_tokens_ += generated_tokens;
  if (ttft_s >= 0) ttft_.observe(ttft_s);
  e2e_.observe(e2e_s);
}

void Metrics::inter_token(double seconds) {
  std::lock_guard lk(m_);
  itl_.observe(seconds);
}

void Metrics::compression(double seconds) {
  std::lock_guard lk(m_);
  compression_.observe(seconds);
}

void Metrics::rejected(const std::string& reason) {
  std::lock_guard lk(m_);
  bump(rejected_, reason);
}

void Metrics::http_error(int status) {
  std::lock_guard lk(m_);
  bump(http_errors_, status);
}

void Metrics::steps(int64_t decode_rows, int64_t prefill_items) {
  std::lock_guard lk(m_);
  ++steps_;
  step_rows_ += decode_rows;
  step_prefills_ += prefill_items;
}

void Metrics::heap_trim(double seconds) {
  std::lock_guard lk(m_);
  ++heap_trims_;
  heap_trim_s_ += seconds;
}

int64_t Metrics::running() const {
  std::lock_guard lk(m_);
  return running_;
}
int64_t Metrics::running_peak() const {
  std::lock_guard lk(m_);
  return running_peak_;
}
int64_t Metrics::waiting() const {
  std::lock_guard lk(m_);
  return waiting_;
}
size_t Metrics::kv_bytes_in_use() const {
  std::lock_guard lk(m_);
  return kv_in_use_;
}

std::string Metrics::render() const {
  std::lock_guard lk(m_);
  std::string o;
  const auto gauge = [&o](const char* name, const char* help, auto v) {
    header(o, name, help, "gauge");
    o += fmt::format("{} {}\n", name, v);
  };
  const auto counter = [&o](const char* name, const char* help, auto v) {
    header(o, name, help, "counter");
    o += fmt::format("{} {}\n", name, v);
  };
  gauge("snapkv_requests_running", "Requests admitted (prefilling or decoding).", running_);
  gauge("snapkv_requests_running_peak", "Most requests admitted at once since start.", running_peak_);
  gauge("snapkv_requests_waiting", "Requests queued for admission.", waiting_);
  gauge("snapkv_kv_cache_bytes_in_use", "KV cache bytes held by running sequences.", kv_in_use_);
  gauge("snapkv_kv_cache_bytes_reserved", "KV cache bytes reserved by admitted requests (projection).", kv_reserved_);
  gauge("snapkv_kv_cache_bytes_budget", "The --kv-memory-budget (0: unlimited).", kv_budget_);
  gauge("snapkv_kv_cache_bytes_in_use_peak", "Most KV cache bytes held at once since start.", kv_peak_);
  counter("snapkv_prompt_tokens_total", "Prompt tokens of finished requests.", prompt_tokens_);
  counter("snapkv_generated_tokens_total", "Generated tokens of finished requests.", generated_tokens_);
  counter("snapkv_engine_steps_total", "Engine::step calls.", steps_);
  counter("snapkv_engine_step_decode_rows_total", "Decode rows over all steps.", step_rows_);
  counter("snapkv_engine_step_prefill_items_total", "Prefill items over all steps.", step_prefills_);
  counter("snapkv_heap_trims_total", "Freed heap memory returned to the OS (malloc_trim) by the scheduler.",
          heap_trims_);
  counter("snapkv_heap_trim_seconds_total", "Time the scheduler spent in malloc_trim.", heap_trim_s_);
  header(o, "snapkv_requests_finished_total", "Finished requests by finish reason.", "counter");
  for (const auto& [k, n] : finished_) o += fmt::format("snapkv_requests_finished_total{{reason=\"{}\"}} {}\n", k, n);
  header(o, "snapkv_admission_rejections_total", "Requests refused before admission, by reason.", "counter");
  for (const auto& [k, n] : rejected_)
    o += fmt::format("snapkv_admission_rejections_total{{reason=\"{}\"}} {}\n", k, n);
  header(o, "snapkv_http_errors_total", "Error responses by HTTP status.", "counter");
  for (const auto& [k, n] : http_errors_) o += fmt::format("snapkv_http_errors_total{{status=\"{}\"}} {}\n", k, n);
  ttft_.render(o, "snapkv_time_to_first_token_seconds", "Time from submission to the first token.");
  itl_.render(o, "snapkv_inter_token_latency_seconds", "Time between consecutive tokens of a stream.");
  e2e_.render(o, "snapkv_request_duration_seconds", "Time from submission to the end of a request.");
  compression_.render(o, "snapkv_compression_seconds", "Time in presses and compaction per request.");
  return o;
}

}  // namespace snapkv::server
