// snapkv: the raw storage behind a KV head's rows (kv/kv_cache.h): byte buffers that grow and
// shrink without copying their rows when they are large.
//
// A KV head's K and V rows must be contiguous (the attention kernels stream them), and the cache
// holds exactly what it needs (it grows by a fixed number of entries and shrinks to exactly what a
// press keeps), so a buffer changes size many times. Copying it each time costs as much as
// reading the whole cache: at 16K tokens of a SmolLM2-shaped model, 376 MB per decode step that
// grows the cache (the first step after prefill, then every KVHeadCache::kGrowEntries steps).
// Buffers of at least kMapBytes are therefore their own anonymous memory mappings, resized with
// mremap(2) on Linux: the kernel moves page tables, the rows stay where they are in physical
// memory. Smaller buffers come from the heap (64-byte aligned) and are copied.
#pragma once

#include <cstddef>

namespace snapkv::kvbuf {

/// Buffers of this many bytes or more are memory mappings (a multiple of the page size is
/// reserved; the slack, under one page, is not counted by the cache's byte totals).
inline constexpr size_t kMapBytes = size_t{64} << 10;

/// A buffer of `bytes` bytes (uninitialized; 64-byte aligned), or nullptr for 0. Throws
/// std::bad_alloc when the memory cannot be had.
void* allocate(size_t bytes);

/// Frees a buffer that allocate() or resize() returned for exactly `bytes` bytes (null: nothing).
void release(void* p, size_t bytes) noexcept;

/// Makes p (a buffer of old_bytes bytes, or null with old_bytes 0) a buffer of new_bytes bytes
/// whose first keep_bytes bytes (<= both sizes) are p's. Returns the new buffer (p itself may be
/// reused or moved; it is invalid afterwards) or nullptr for new_bytes 0. Two mappings on Linux:
/// mremap, no copy. Throws std::bad_alloc, leaving p as it was, when memory cannot be had.
void* resize(void* p, size_t old_bytes, size_t new_bytes, size_t keep_bytes);

}  // namespace snapkv::kvbuf
