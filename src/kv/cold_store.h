// snapkv: the cold tier of a compressed sequence (issue 10) — a copy of every prompt key and
// value of each compressed layer, kept in a cheaper form than the hot KV cache so that a later
// question can bring back the entries compression evicted (Sequence re-selection,
// docs/follow-up.md).
//
// What is stored: when a full-attention layer of a prompt of L tokens is compressed, all L entries
// of each KV head (positions 0..L-1: a compressing prefill starts on an empty sequence, so entry i
// has position i) before the press evicts any. Storing the whole layer instead of only the
// evicted entries keeps the layout dense (row p is position p, no position list) and lets
// re-selection read every key in one pass; it costs the kept entries a second time in the cold
// format (C of L rows, a few percent at the budgets SnapKV is used with).
//
// Formats (bytes per stored row of head_dim elements, K and V each):
//   Int8  symmetric per-row absmax quantization: scale = max|x| / 127 (f32), q = round(x / scale)
//         in [-127, 127]; dequantized x' = q * scale, |x - x'| <= scale / 2 = max|x| / 254.
//         head_dim + 4 bytes (SmolLM2, head_dim 64: 68 B vs 128 B in F16).
//   F16   IEEE half, the hot cache's own format: a row copied from an F16 hot cache is exact.
// Where: RAM (heap), or a file in a directory (disk:DIR; unlinked as soon as it is created),
// written once per layer and read back through a read-only shared memory mapping, so the cold
// bytes live in the page cache, not in the process's anonymous memory. Settings:
// include/snapkv/cold_tier.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "snapkv/cold_tier.h"

namespace snapkv {

struct KVLayerCache;

/// The cold copies of a sequence's compressed layers: per (layer, KV head), K and V rows of the
/// positions 0..n_tokens(layer)-1. Written layer by layer (put_layer) while its sequence
/// compresses, then only read; a stored layer is immutable, so forks of a compressed sequence
/// share one store. Not thread-safe while layers are being put; concurrent reads are safe.
class ColdStore {
 public:
  /// A store for a model of n_layer layers x n_head_kv KV heads of head_dim. With a directory
  /// (disk), its file is created there now and unlinked at once (the descriptor keeps it; nothing
  /// is left behind by any exit). Throws snapkv::Error for non-positive sizes or a directory where
  /// no file can be created.
  ColdStore(int n_layer, int n_head_kv, int head_dim, ColdTierOptions opt);
  ~ColdStore();
  ColdStore(const ColdStore&) = delete;
  ColdStore& operator=(const ColdStore&) = delete;

  ColdFormat format() const { return opt_.format; }
  const ColdTierOptions& options() const { return opt_; }
  int n_layer() const { return n_layer_; }
  int n_head_kv() const { return n_head_kv_; }
  int head_dim() const { return head_dim_; }

  /// Copies every entry of `layer` (layer.layer; each head must hold positions 0..n-1, the same n
  /// for every head, n >= 1) into the store in its format. Throws snapkv::Error, storing nothing,
  /// for a layer already stored, a head count or head_dim that differs, positions that are not
  /// 0..n-1, or a file that cannot be written.
  void put_layer(const KVLayerCache& layer);
  /// Stores rows given as f32 ([n_head_kv][n][head_dim] for K and for V), for layer `il`
  /// (used by put_layer and by session files). Same errors.
  void put_rows(int il, int64_t n, const float* k, const float* v);

  /// Stores layer il from its encoded bytes as encoded_layer() gave them (n rows per head and
  /// kind, bytes.size() == n_head_kv x 2 x n x cold_row_bytes(format, head_dim)): used to restore
  /// saved sessions without re-quantizing. Same errors as put_rows, and a size mismatch.
  void put_encoded(int il, int64_t n, std::span<const unsigned char> bytes);
  /// The encoded bytes of stored layer il: [n_head_kv][K rows, V rows][n_tokens(il)] rows of
  /// cold_row_bytes() each (empty if the layer is not stored). Valid while the store lives.
  std::span<const unsigned char> encoded_layer(int il) const;

  bool has_layer(int il) const;
  /// Positions stored for layer il (0 if none).
  int64_t n_tokens(int il) const;
  /// Rows [p0, p0 + count) of KV head h of layer il, dequantized to f32: k_out / v_out
  /// [count x head_dim] (either may be null). Throws snapkv::Error for a layer not stored or a
  /// range outside [0, n_tokens(il)).
  void read(int il, int h, int64_t p0, int64_t count, float* k_out, float* v_out) const;

  /// Payload bytes of the stored rows (K and V of every stored layer and head, scales included),
  /// wherever they live.
  size_t bytes() const;
  /// The part of bytes() held in this process's heap (0 for a disk store).
  size_t ram_bytes() const;

 private:
  struct LayerRows;
  const unsigned char* row_ptr(const LayerRows& lr, int h, bool value, int64_t p) const;
  /// Encodes n rows per head (row_of(h, value, i, out[head_dim]) gives each as f32) as layer il.
  void store(int il, int64_t n, const std::function<void(int, bool, int64_t, float*)>& row_of);
  /// Checks that layer il may be stored (in range, not yet stored, n >= 1).
  void check_new_layer(int il, int64_t n) const;
  /// Makes lr (encoded in its heap) layer il: in RAM as it is, or written to the file and mapped.
  void place(int il, std::unique_ptr<LayerRows> lr);

  int n_layer_, n_head_kv_, head_dim_;
  ColdTierOptions opt_;
  std::vector<std::unique_ptr<LayerRows>> layers_;
  int fd_ = -1;  ///< the store's file under opt_.dir (disk only; unlinked at creation)
  size_t file_size_ = 0;
};

}  // namespace snapkv
