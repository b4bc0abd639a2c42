// snapkv server: metrics, rendered in the Prometheus text exposition format (GET /metrics).
// Names are prefixed snapkv_ (docs/server.md lists them). Thread-safe: one mutex.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace snapkv::server {

/// A cumulative histogram with fixed upper bounds (seconds).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  /// The Prometheus lines of metric `name` (_bucket{le=...}, _sum, _count).
  void render(std::string& out, const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative), last = +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();

  // Gauges, set by the scheduler after each change.
  void set_state(int64_t running, int64_t waiting, size_t kv_bytes_in_use, size_t kv_bytes_reserved);
  void set_budget(size_t kv_budget_bytes);
  /// Admission changed the counts of running and waiting requests (a submit, a queued request
  /// cancelled or refused): published before any client concerned is answered.
  void set_counts(int64_t running, int64_t waiting);
  /// One running request has ended and freed `kv_bytes` of KV cache; `running` requests remain.
  /// Called before its client is answered, so that a /metrics scrape made after the answer never
  /// counts it. The KV bytes in use are an estimate until the next set_state (0 once nothing runs).
  void sequence_released(int64_t running, size_t kv_bytes, size_t kv_bytes_reserved);
  // Counters and histograms.
  void request_finished(const std::string& finish_reason, int64_t prompt_tokens, int64_t generated_tokens,
                        double ttft_s, double e2e_s);
  void inter_token(double seconds);
  void compression(double seconds);
  void rejected(const std::string& reason);  ///< "queue_full", "too_large", "shutting_down"
  void http_error(int status);
  void steps(int64_t decode_rows, int64_t prefill_items);
  void heap_trim(double seconds);  ///< one malloc_trim by the scheduler, and how long it took

  /// Snapshot of the gauges (tests and logs).
  int64_t running() const;
  int64_t running_peak() const;  ///< most requests running at once so far
  int64_t waiting() const;
  size_t kv_bytes_in_use() const;

  std::string render() const;

 private:
  mutable std::mutex m_;
  int64_t running_ = 0, waiting_ = 0, running_peak_ = 0;
  size_t kv_in_use_ = 0, kv_reserved_ = 0, kv_budget_ = 0, kv_peak_ = 0;
  int64_t prompt_tokens_ = 0, generated_tokens_ = 0, steps_ = 0, step_rows_ = 0, step_prefills_ = 0;
  int64_t heap_trims_ = 0;
  double heap_trim_s_ = 0;
  std::vector<std::pair<std::string, int64_t>> finished_;  // by finish reason
  std::vector<std::pair<std::string, int64_t>> rejected_;  // by reason
  std::vector<std::pair<int, int64_t>> http_errors_;       // by status
  Histogram ttft_, itl_, e2e_, compression_;
};

}  // namespace snapkv::server
