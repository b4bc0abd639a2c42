// snapkv server: SessionStore — the compressed contexts that requests named with "session"
// (issue 10, prompt caching): each entry is an idle, prefilled and compressed Sequence (its cold
// tier included) that follow-up requests fork and re-select from, kept under a byte budget with
// least-recently-used eviction (docs/follow-up.md, "Server sessions").
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "snapkv/sequence.h"

namespace snapkv::server {

/// What the store did so far (for /metrics and tests).
struct SessionStoreStats {
  size_t entries = 0;
  size_t bytes = 0;        ///< hot KV + cold-tier bytes of the stored contexts
  uint64_t hits = 0;       ///< find() returned a stored context
  uint64_t misses = 0;     ///< find() found none, or one of another context (dropped)
  uint64_t stored = 0;     ///< put() kept a context
  uint64_t evictions = 0;  ///< contexts dropped to stay within the budget
  uint64_t too_large = 0;  ///< put() refused a context larger than the whole budget
};

/// Thread-safe (one mutex); the scheduler thread is its only writer.
class SessionStore {
 public:
  /// `budget_bytes`: the most bytes (hot KV + cold tier, wherever the cold rows live) the stored
  /// contexts may hold together; 0 stores nothing.
  explicit SessionStore(size_t budget_bytes) : budget_(budget_bytes) {}

  /// The context stored under `id` if its fingerprint (tokens + press) is `fingerprint`, marked as
  /// the most recently used; nullptr if there is none. A stored context with another fingerprint
  /// (the client sent another document under that id) is dropped.
  std::shared_ptr<const Sequence> find(const std::string& id, const std::string& fingerprint);
  /// Stores `seq` (idle: no pending prefill) under `id`, replacing what was there, then evicts the
  /// least recently used contexts until the total fits the budget. Returns false (storing
  /// nothing) when `seq` alone exceeds the budget.
  bool put(const std::string& id, const std::string& fingerprint, std::shared_ptr<const Sequence> seq);
  /// Bytes a stored sequence counts: its hot KV bytes plus its cold-tier bytes.
  static size_t bytes_of(const Sequence& seq);

  size_t budget() const { return budget_; }
  SessionStoreStats stats() const;

 private:
  struct Entry {
    std::string id;
    std::string fingerprint;
    std::shared_ptr<const Sequence> seq;
    size_t bytes = 0;
  };
  void erase_locked(std::list<Entry>::iterator it);

  const size_t budget_;
  mutable std::mutex m_;
  std::list<Entry> lru_;  ///< most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  SessionStoreStats stats_;
};

}  // namespace snapkv::server
