// snapkv server: the session store (see session_store.h).
#include "server/session_store.h"

namespace snapkv::server {

size_t SessionStore::bytes_of(const Sequence& seq) { return seq.stats().kv_cache_bytes + seq.stats().kv_cold_bytes; }

std::shared_ptr<const Sequence> SessionStore::find(const std::string& id, const std::string& fingerprint) {
  std::lock_guard lk(m_);
  const auto it = index_.find(id);
  if (it == index_.end()) {
    ++stats_.misses;
    return nullptr;
  }
  if (it->second->fingerprint != fingerprint) {
    ++stats_.misses;
    erase_locked(it->second);
    return nullptr;
  }
  lru_.splice(lru_.begin(), lru_, it->second);  // most recently used first
  ++stats_.hits;
  return it->second->seq;
}

bool SessionStore::put(const std::string& id, const std::string& fingerprint, std::shared_ptr<const Sequence> seq) {
  const size_t bytes = bytes_of(*seq);
  std::lock_guard lk(m_);
  if (const auto it = index_.find(id); it != index_.end()) erase_locked(it->second);
  if (budget_ == 0 || bytes > budget_) {
    ++stats_.too_large;
    return false;
  }
  while (!lru_.empty() && stats_.bytes + bytes > budget_) {
    erase_locked(std::prev(lru_.end()));
    ++stats_.evictions;
  }
  lru_.push_front(Entry{id, fingerprint, std::move(seq), bytes});
  index_[id] = lru_.begin();
  stats_.bytes += bytes;
  stats_.entries = lru_.size();
  ++stats_.stored;
  return true;
}

void SessionStore::erase_locked(std::list<Entry>::iterator it) {
  stats_.bytes -= it->bytes;
  index_.erase(it->id);
  lru_.erase(it);
  stats_.entries = lru_.size();
}

SessionStoreStats SessionStore::stats() const {
  std::lock_guard lk(m_);
  return stats_;
}

}  // namespace snapkv::server
