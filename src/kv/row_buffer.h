// snapkv: the raw storage behind a KV head's rows (kv/kv_cache.h): byte buffers that grow and
// shrink without copying their rows when they are large.
//
// A KV head's K and V rows must be contiguous (the attention kernels stream them), and the cache
// holds exactly what it needs (it grows by a fixed number of entries and shrinks to exactly what a
// press keeps), so a buffer changes size many times. Copying it each time costs as much as
// reading the whole cache: at 16K tokens of a SmolLM2-shaped model, 376 MB in the decode step
// that grows the cache (the first step after prefill, then every KVHeadCache::kGrowEntries steps).
// Buffers of at least kMapBytes are therefore their own anonymous memory mappings, resized with
// mremap(2) on Linux: the kernel moves page tables, the rows stay where they are in physical
// memory. Smaller buffers come from the heap (64-byte aligned) and are copied, as is any buffer
// the kernel refuses to map or that would take the process's buffer mappings past a quarter of
// vm.max_map_count (65,530 by default): the heap serves it instead. The threshold also bounds
// the mappings to (KV bytes) / 256 KiB. AddressSanitizer and ThreadSanitizer builds map
// nothing: every KV buffer keeps ASan's redzones, and TSan does not follow memory that mremap
// moves (the Release tests run the mapped path).
#pragma once

#include <cstddef>
#include <cstdint>

namespace snapkv::kvbuf {

/// Buffers of this many bytes or more are memory mappings (whole pages are reserved; the slack,
/// under one page, is not counted by the cache's byte totals).
inline constexpr size_t kMapBytes = size_t{256} << 10;

/// False in AddressSanitizer and ThreadSanitizer builds (see the file comment): every buffer is
/// then heap memory.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kMapsLargeBuffers = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kMapsLargeBuffers = false;
#else
inline constexpr bool kMapsLargeBuffers = true;
#endif
#else
inline constexpr bool kMapsLargeBuffers = true;
#endif

/// One buffer: `bytes` usable bytes at p (64-byte aligned; null when bytes is 0), a memory
/// mapping when `mapped`, else heap memory.
struct Buffer {
  void* p = nullptr;
  size_t bytes = 0;
  bool mapped = false;
};

/// Makes b (empty, or a buffer these functions made) hold new_bytes bytes whose first keep_bytes
/// bytes (<= both sizes) are b's; the new bytes are uninitialized, and new_bytes 0 frees it.
/// Two mappings on Linux: mremap, no copy. Throws std::bad_alloc, leaving b as it was, when
/// memory cannot be had.
void resize(Buffer& b, size_t new_bytes, size_t keep_bytes);

/// Frees b and leaves it empty.
void release(Buffer& b) noexcept;

/// Buffers of this process that are memory mappings now (for tests and diagnostics).
int64_t live_mappings();

}  // namespace snapkv::kvbuf
