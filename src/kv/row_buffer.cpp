// Growable row storage of the KV cache (see kv/row_buffer.h).
#include "kv/row_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <new>

namespace snapkv::kvbuf {

namespace {

constexpr std::align_val_t kAlign{64};

size_t page_round(size_t bytes) {
  static const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

/// Mappings made here and not yet unmapped, over the whole process.
std::atomic<int64_t> g_live_mappings{0};

/// The most mappings buffers may hold at once: a quarter of the kernel's per-process limit
/// (vm.max_map_count, 65,530 by default), leaving the rest to thread stacks, malloc and the
/// model file.
int64_t mapping_cap() {
  static const int64_t cap = [] {
    int64_t limit = 65530;
    std::ifstream f("/proc/sys/vm/max_map_count");
    if (int64_t v = 0; f >> v && v > 0) limit = v;
    return limit / 4;
  }();
  return cap;
}

/// A new buffer of `bytes` (> 0) bytes: a mapping when large enough and the kernel gives one
/// (within mapping_cap()), else the heap (throws std::bad_alloc when that fails too).
Buffer allocate(size_t bytes) {
  if (kMapsLargeBuffers && bytes >= kMapBytes) {
    if (g_live_mappings.fetch_add(1) < mapping_cap()) {
      void* p = mmap(nullptr, page_round(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p != MAP_FAILED) return {p, bytes, true};
    }
    g_live_mappings.fetch_sub(1);  // no mapping made
  }
  return {::operator new(bytes, kAlign), bytes, false};
}

}  // namespace

int64_t live_mappings() { return g_live_mappings.load(); }

void resize(Buffer& b, size_t new_bytes, size_t keep_bytes) {
  if (new_bytes == b.bytes) return;
  if (new_bytes == 0) return release(b);
#if defined(__linux__)
  if (b.mapped && new_bytes >= kMapBytes) {
    void* q = page_round(b.bytes) == page_round(new_bytes)
                  ? b.p
                  : mremap(b.p, page_round(b.bytes), page_round(new_bytes), MREMAP_MAYMOVE);
    if (q != MAP_FAILED) {
      b.p = q;
      b.bytes = new_bytes;
      return;
    }  // else copied below
  }
#endif
  Buffer n = allocate(new_bytes);
  if (keep_bytes > 0) std::memcpy(n.p, b.p, keep_bytes);
  release(b);
  b = n;
}

void release(Buffer& b) noexcept {
  if (b.p != nullptr) {
    if (!b.mapped) {
      ::operator delete(b.p, kAlign);
    } else if (munmap(b.p, page_round(b.bytes)) == 0) {
      g_live_mappings.fetch_sub(1);
    } else {
      // munmap can fail (ENOMEM) when it must split a merged mapping at the kernel's mapping
      // limit: the address range stays reserved (and counted), its memory goes back.
      madvise(b.p, page_round(b.bytes), MADV_DONTNEED);
    }
  }
  b = Buffer{};
}

}  // namespace snapkv::kvbuf
