// Growable row storage of the KV cache (see kv/row_buffer.h).
#include "kv/row_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <new>

namespace snapkv::kvbuf {

namespace {

constexpr std::align_val_t kAlign{64};

bool mapped(size_t bytes) { return bytes >= kMapBytes; }

size_t page_round(size_t bytes) {
  static const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

}  // namespace

void* allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  if (!mapped(bytes)) return ::operator new(bytes, kAlign);
  void* p = mmap(nullptr, page_round(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return p;
}

void release(void* p, size_t bytes) noexcept {
  if (p == nullptr) return;
  if (mapped(bytes))
    munmap(p, page_round(bytes));
  else
    ::operator delete(p, kAlign);
}

void* resize(void* p, size_t old_bytes, size_t new_bytes, size_t keep_bytes) {
#if defined(__linux__)
  if (p != nullptr && mapped(old_bytes) && mapped(new_bytes)) {
    if (page_round(old_bytes) == page_round(new_bytes)) return p;
    void* q = mremap(p, page_round(old_bytes), page_round(new_bytes), MREMAP_MAYMOVE);
    if (q == MAP_FAILED) throw std::bad_alloc();
    return q;
  }
#endif
  void* q = allocate(new_bytes);
  if (keep_bytes > 0) std::memcpy(q, p, keep_bytes);
  release(p, old_bytes);
  return q;
}

}  // namespace snapkv::kvbuf
