// snapkv: the ragged per-head KV cache. Every (layer, KV head) stores its own list of entries
// (original token position, key after RoPE, value), so presses can keep a different set of
// positions per head. Evicted entries are freed (the buffers are reallocated to the exact size),
// never masked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/rows_view.h"
#include "kv/row_buffer.h"

namespace snapkv {

/// Entries of one KV head of one layer: pos[n], K rows [n x head_dim], V rows [n x head_dim].
/// Keys are stored as `k_type`, values as `v_type`: F16 (IEEE half, round-to-nearest-even on
/// store), F32, Q8_0 or Q4_0 (a row is head_dim / 32 blocks of 34 or 18 bytes; see
/// snapkv/kv_type.h). The two types are equal or both quantized (kv_types_combine). Key row i
/// starts at i * kv_row_bytes(k_type, head_dim) bytes, value row i at i * kv_row_bytes(v_type,
/// head_dim). Entries are kept in ascending position order (appends must come with increasing
/// positions).
/// Capacity is managed explicitly: reserve() allocates exactly the requested entries; append()
/// past the capacity grows by `kGrowEntries` (never doubling), so decoding allocates once every
/// kGrowEntries tokens, not per token. Buffers of 256 KiB and more are memory mappings that grow
/// and shrink without copying their rows (kv/row_buffer.h): growing a 16K-token cache costs page
/// table updates, not a pass over its bytes.
class KVHeadCache {
 public:
  static constexpr int64_t kGrowEntries = 128;

  /// Throws snapkv::Error for head_dim < 1, a quantized type with head_dim % 32 != 0, or types
  /// that do not combine (kv_types_combine).
  KVHeadCache(KVType k_type, KVType v_type, int head_dim);
  /// Keys and values of one type.
  KVHeadCache(KVType type, int head_dim) : KVHeadCache(type, type, head_dim) {}
  KVHeadCache(KVHeadCache&&) noexcept;
  KVHeadCache& operator=(KVHeadCache&&) noexcept;
  KVHeadCache(const KVHeadCache&) = delete;
  KVHeadCache& operator=(const KVHeadCache&) = delete;
  ~KVHeadCache();

  KVType k_type() const { return k_type_; }
  KVType v_type() const { return v_type_; }
  int head_dim() const { return head_dim_; }
  int64_t size() const { return n_; }
  int64_t capacity() const { return cap_; }
  bool empty() const { return n_ == 0; }

  /// Original positions of the entries, ascending.
  std::span<const int32_t> positions() const { return {pos(), static_cast<size_t>(n_)}; }
  const int32_t* pos_data() const { return pos(); }
  /// Raw rows: uint16_t (F16), float (F32) or Q8_0 / Q4_0 blocks, [size() x k_row_bytes()] and
  /// [size() x v_row_bytes()], contiguous.
  const void* k_data() const { return k_.p; }
  const void* v_data() const { return v_.p; }
  /// Views for presses (valid until the next mutation).
  RowsView keys() const;
  RowsView values() const;
  /// Row i as f32 (for tests and presses): out[head_dim].
  void key_row(int64_t i, float* out) const;
  void value_row(int64_t i, float* out) const;

  /// Makes the capacity at least `n` entries; reallocates to exactly `n` if it grows.
  void reserve(int64_t n);
  /// Appends `count` entries: positions pos[count], keys/values as f32 rows with row strides
  /// `k_stride`/`v_stride` floats. Positions must be > the last stored position (throws
  /// snapkv::Error otherwise). Grows by max(count, kGrowEntries) entries past the capacity.
  void append(int64_t count, const int32_t* pos, const float* k, int64_t k_stride, const float* v, int64_t v_stride);
  /// Keeps only the entries at `indices` (ascending, unique, each < size(); throws snapkv::Error
  /// otherwise), compacting in place order and reallocating the buffers to exactly indices.size()
  /// entries so the evicted ones are released.
  void keep(std::span<const int32_t> indices);
  /// Drops the `count` oldest entries (memmove; capacity unchanged). Used by sliding-window layers.
  void drop_front(int64_t count);
  /// Drops the entries at positions >= `pos` (the newest: positions ascend; capacity unchanged).
  /// Used to take back a failed step's appends.
  void drop_from(int32_t pos);
  /// Removes every entry and frees the buffers.
  void clear();
  /// Replaces the contents with `n` entries given as stored: positions pos[n] (strictly
  /// ascending, >= 0), K and V rows in this cache's element types ([n x head_dim] each, raw bytes
  /// as k_data()/v_data() give them). Used to restore saved sessions. Throws snapkv::Error,
  /// changing nothing, for n < 0 or positions that are not strictly ascending and >= 0.
  void assign(int64_t n, const int32_t* pos, const void* k, const void* v);
  /// A deep copy holding exactly size() entries (capacity == size()).
  KVHeadCache clone() const;

  /// Bytes of one stored key row (kv_row_bytes(k_type, head_dim)) and value row.
  size_t k_row_bytes() const { return k_rb_; }
  size_t v_row_bytes() const { return v_rb_; }
  /// Payload bytes of the stored entries: size() * (k_row_bytes() + v_row_bytes()) (exact).
  size_t bytes() const;
  /// Payload bytes allocated (capacity() * (k_row_bytes() + v_row_bytes())).
  size_t capacity_bytes() const;

 private:
  void reallocate(int64_t new_cap);

  KVType k_type_;
  KVType v_type_;
  size_t k_rb_ = 0;
  size_t v_rb_ = 0;
  int head_dim_;
  int64_t n_ = 0;
  int64_t cap_ = 0;
  // Positions (int32), key rows, value rows: each holds at least cap_ entries (kv/row_buffer.h).
  kvbuf::Buffer pos_;
  kvbuf::Buffer k_;
  kvbuf::Buffer v_;
  int32_t* pos() const { return static_cast<int32_t*>(pos_.p); }
  uint8_t* k_rows() const { return static_cast<uint8_t*>(k_.p); }
  uint8_t* v_rows() const { return static_cast<uint8_t*>(v_.p); }
};

/// The caches of one layer: one KVHeadCache per KV head. `window` > 0 marks a sliding-window
/// layer: a query at position p attends only keys with p - key_pos < window, and the layer keeps
/// about the window - 1 most recent entries (trimmed in batches; see KVCache::make_room).
struct KVLayerCache {
  int layer = 0;
  int window = 0;  ///< 0 = full attention
  std::vector<KVHeadCache> heads;

  bool is_swa() const { return window > 0; }
  size_t bytes() const;
  size_t capacity_bytes() const;
  /// Mean over heads of the entries held.
  double mean_entries() const;
};

/// The whole cache: n_layer layers x n_head_kv heads.
class KVCache {
 public:
  /// `layer_window[il]` = sliding window of layer il (0 = full attention). Keys stored as
  /// `k_type`, values as `v_type` (see KVHeadCache).
  KVCache(int n_layer, int n_head_kv, int head_dim, KVType k_type, KVType v_type, const std::vector<int>& layer_window);
  /// Keys and values of one type.
  KVCache(int n_layer, int n_head_kv, int head_dim, KVType type, const std::vector<int>& layer_window)
      : KVCache(n_layer, n_head_kv, head_dim, type, type, layer_window) {}
  KVCache(KVCache&&) noexcept = default;
  KVCache& operator=(KVCache&&) noexcept = default;

  int n_layer() const { return static_cast<int>(layers_.size()); }
  int n_head_kv() const { return n_head_kv_; }
  int head_dim() const { return head_dim_; }
  KVType k_type() const { return k_type_; }
  KVType v_type() const { return v_type_; }
  KVLayerCache& layer(int il) { return layers_.at(static_cast<size_t>(il)); }
  const KVLayerCache& layer(int il) const { return layers_.at(static_cast<size_t>(il)); }

  /// Prepares layer `il` to receive `n_new` more entries per head: sliding-window layers first
  /// drop entries no future query (position >= next_pos) can see, keeping the window - 1 most
  /// recent; then the capacity is made exactly enough (full layers: size + n_new; SWA layers:
  /// window - 1 + max(n_new, slack)), never shrinking. With `decode` (rows of a decode step, any
  /// number), or for a single entry, a full layer that must grow grows by kGrowEntries more, so
  /// that decoding allocates once every kGrowEntries tokens, not every step.
  void make_room(int il, int64_t n_new, bool decode = false);

  /// Payload bytes held now / allocated, over all layers and heads.
  size_t bytes() const;
  size_t capacity_bytes() const;
  /// Frees everything.
  void clear();
  /// A deep copy (every head at its exact size).
  KVCache clone() const;

  /// Extra entries a sliding-window layer may hold beyond window - 1 before it is trimmed.
  static constexpr int64_t kSwaSlack = 64;

 private:
  int n_head_kv_;
  int head_dim_;
  KVType k_type_;
  KVType v_type_;
  std::vector<KVLayerCache> layers_;
};

}  // namespace snapkv
