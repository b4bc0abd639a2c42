// Ragged per-head KV cache (see kv/kv_cache.h).
#include "kv/kv_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

#include "core/kv_rows.h"
#include "kv/row_buffer.h"
#include "quant/quant.h"
#include "snapkv/error.h"

namespace snapkv {

KVHeadCache::KVHeadCache(KVType k_type, KVType v_type, int head_dim)
    : k_type_(k_type), v_type_(v_type), head_dim_(head_dim) {
  if (head_dim < 1) throw Error(fmt::format("KV cache: head_dim {} must be >= 1", head_dim));
  if (!kv_types_combine(k_type, v_type))
    throw Error(
        fmt::format("KV cache: keys of type {} with values of type {}: mixed types must both be quantized "
                    "(q8_0 / q4_0)",
                    kv_type_name(k_type), kv_type_name(v_type)));
  for (const KVType t : {k_type, v_type})
    if (!kv_type_supports(t, head_dim))
      throw Error(fmt::format("KV cache: type {} needs head_dim a multiple of {}, got {}", kv_type_name(t), kKVQ8Block,
                              head_dim));
  k_rb_ = kv_row_bytes(k_type, head_dim);
  v_rb_ = kv_row_bytes(v_type, head_dim);
}

KVHeadCache::KVHeadCache(KVHeadCache&& o) noexcept
    : k_type_(o.k_type_),
      v_type_(o.v_type_),
      k_rb_(o.k_rb_),
      v_rb_(o.v_rb_),
      head_dim_(o.head_dim_),
      n_(std::exchange(o.n_, 0)),
      cap_(std::exchange(o.cap_, 0)),
      pos_(std::exchange(o.pos_, {})),
      k_(std::exchange(o.k_, {})),
      v_(std::exchange(o.v_, {})) {}

KVHeadCache& KVHeadCache::operator=(KVHeadCache&& o) noexcept {
  if (this != &o) {
    clear();
    k_type_ = o.k_type_;
    v_type_ = o.v_type_;
    k_rb_ = o.k_rb_;
    v_rb_ = o.v_rb_;
    head_dim_ = o.head_dim_;
    n_ = std::exchange(o.n_, 0);
    cap_ = std::exchange(o.cap_, 0);
    pos_ = std::exchange(o.pos_, {});
    k_ = std::exchange(o.k_, {});
    v_ = std::exchange(o.v_, {});
  }
  return *this;
}

KVHeadCache::~KVHeadCache() { clear(); }

RowsView KVHeadCache::keys() const { return RowsView{k_.p, k_type_, n_, head_dim_}; }
RowsView KVHeadCache::values() const { return RowsView{v_.p, v_type_, n_, head_dim_}; }

void KVHeadCache::key_row(int64_t i, float* out) const {
  if (i < 0 || i >= n_) throw Error(fmt::format("KV cache: key row {} out of range (size {})", i, n_));
  keys().row(i, out);
}

void KVHeadCache::value_row(int64_t i, float* out) const {
  if (i < 0 || i >= n_) throw Error(fmt::format("KV cache: value row {} out of range (size {})", i, n_));
  values().row(i, out);
}

void KVHeadCache::reallocate(int64_t new_cap) {
  // Each buffer is resized whole or not at all (kvbuf::resize), so a throw leaves every buffer
  // valid. cap_ stays at most what all three hold: a shrink lowers it first, a growth raises it
  // once all three have grown.
  const auto cap = static_cast<size_t>(new_cap);
  const auto keep = static_cast<size_t>(std::min(n_, new_cap));
  auto resize_all = [&] {
    kvbuf::resize(pos_, cap * sizeof(int32_t), keep * sizeof(int32_t));
    kvbuf::resize(k_, cap * k_rb_, keep * k_rb_);
    kvbuf::resize(v_, cap * v_rb_, keep * v_rb_);
  };
  if (new_cap < cap_) {
    // A shrink is best effort: if memory for a smaller heap copy cannot be had, the buffers stay
    // larger than needed (allowed: each holds at least cap_ entries) and the caller goes on.
    cap_ = new_cap;
    try {
      resize_all();
    } catch (const std::bad_alloc&) {
    }
    return;
  }
  resize_all();
  cap_ = new_cap;
}

void KVHeadCache::reserve(int64_t n) {
  if (n > cap_) reallocate(n);
}

void KVHeadCache::append(int64_t count, const int32_t* pos, const float* k, int64_t k_stride, const float* v,
                         int64_t v_stride) {
  if (count <= 0) return;
  int32_t last = n_ > 0 ? this->pos()[n_ - 1] : -1;
  for (int64_t i = 0; i < count; ++i) {
    if (pos[i] <= last)
      throw Error(fmt::format("KV cache: appended position {} is not after the last stored position {}", pos[i], last));
    last = pos[i];
  }
  if (n_ + count > cap_) reallocate(n_ + std::max(count, kGrowEntries));
  std::memcpy(this->pos() + n_, pos, static_cast<size_t>(count) * sizeof(int32_t));
  // One row of type t at dst from the f32 row x.
  auto store = [this](KVType t, const float* x, void* dst) {
    if (t == KVType::F16)
      fp32_to_fp16_row(x, static_cast<uint16_t*>(dst), head_dim_);
    else if (kv_type_quantized(t))
      quantize_kv_row(t, x, static_cast<uint8_t*>(dst), head_dim_);
    else
      std::memcpy(dst, x, static_cast<size_t>(head_dim_) * sizeof(float));
  };
  for (int64_t i = 0; i < count; ++i) {
    const auto r = static_cast<size_t>(n_ + i);
    store(k_type_, k + i * k_stride, k_rows() + r * k_rb_);
    store(v_type_, v + i * v_stride, v_rows() + r * v_rb_);
  }
  n_ += count;
}

void KVHeadCache::keep(std::span<const int32_t> indices) {
  int64_t prev = -1;
  for (const int32_t i : indices) {
    if (i <= prev || i >= n_)
      throw Error(fmt::format("KV cache: keep(): index {} is not ascending/unique or out of range (size {})", i, n_));
    prev = i;
  }
  // Compacted in place (entry indices[j] moves down to j, ascending, so nothing is overwritten
  // before it is read), then the buffers shrink to exactly the kept entries: the evicted ones are
  // released, and large buffers shrink without a copy (kv/row_buffer.h).
  const int64_t m = static_cast<int64_t>(indices.size());
  int32_t* p = pos();
  uint8_t* k = k_rows();
  uint8_t* v = v_rows();
  for (int64_t j = 0; j < m; ++j) {
    const auto i = static_cast<size_t>(indices[static_cast<size_t>(j)]);
    const auto jj = static_cast<size_t>(j);
    if (i == jj) continue;
    p[j] = p[i];
    std::memcpy(k + jj * k_rb_, k + i * k_rb_, k_rb_);
    std::memcpy(v + jj * v_rb_, v + i * v_rb_, v_rb_);
  }
  n_ = m;
  reallocate(m);
}

void KVHeadCache::assign(int64_t n, const int32_t* pos, const void* k, const void* v) {
  if (n < 0) throw Error(fmt::format("KV cache: assign() of {} entries", n));
  for (int64_t i = 0; i < n; ++i)
    if (pos[i] < 0 || (i > 0 && pos[i] <= pos[i - 1]))
      throw Error(fmt::format("KV cache: assign(): position {} at entry {} is negative or not ascending", pos[i], i));
  clear();
  if (n == 0) return;
  reallocate(n);
  std::memcpy(this->pos(), pos, static_cast<size_t>(n) * sizeof(int32_t));
  std::memcpy(k_rows(), k, static_cast<size_t>(n) * k_rb_);
  std::memcpy(v_rows(), v, static_cast<size_t>(n) * v_rb_);
  n_ = n;
}

KVHeadCache KVHeadCache::clone() const {
  KVHeadCache c(k_type_, v_type_, head_dim_);
  if (n_ > 0) {
    c.reallocate(n_);
    std::memcpy(c.pos(), pos(), static_cast<size_t>(n_) * sizeof(int32_t));
    std::memcpy(c.k_rows(), k_rows(), static_cast<size_t>(n_) * k_rb_);
    std::memcpy(c.v_rows(), v_rows(), static_cast<size_t>(n_) * v_rb_);
    c.n_ = n_;
  }
  return c;
}

void KVHeadCache::drop_front(int64_t count) {
  if (count <= 0) return;
  if (count > n_) throw Error(fmt::format("KV cache: drop_front({}) of only {} entries", count, n_));
  const auto rest = static_cast<size_t>(n_ - count);
  const auto c = static_cast<size_t>(count);
  std::memmove(pos(), pos() + count, rest * sizeof(int32_t));
  std::memmove(k_rows(), k_rows() + c * k_rb_, rest * k_rb_);
  std::memmove(v_rows(), v_rows() + c * v_rb_, rest * v_rb_);
  n_ -= count;
}

void KVHeadCache::drop_from(int32_t p) {
  const int32_t* ps = pos();
  int64_t n = n_;
  while (n > 0 && ps[n - 1] >= p) --n;
  n_ = n;
}

void KVHeadCache::clear() {
  kvbuf::release(pos_);
  kvbuf::release(k_);
  kvbuf::release(v_);
  n_ = cap_ = 0;
}

size_t KVHeadCache::bytes() const { return static_cast<size_t>(n_) * (k_rb_ + v_rb_); }
size_t KVHeadCache::capacity_bytes() const { return static_cast<size_t>(cap_) * (k_rb_ + v_rb_); }

size_t KVLayerCache::bytes() const {
  size_t b = 0;
  for (const auto& h : heads) b += h.bytes();
  return b;
}

size_t KVLayerCache::capacity_bytes() const {
  size_t b = 0;
  for (const auto& h : heads) b += h.capacity_bytes();
  return b;
}

double KVLayerCache::mean_entries() const {
  if (heads.empty()) return 0.0;
  double s = 0;
  for (const auto& h : heads) s += static_cast<double>(h.size());
  return s / static_cast<double>(heads.size());
}

KVCache::KVCache(int n_layer, int n_head_kv, int head_dim, KVType k_type, KVType v_type,
                 const std::vector<int>& layer_window)
    : n_head_kv_(n_head_kv), head_dim_(head_dim), k_type_(k_type), v_type_(v_type) {
  if (n_layer < 1 || n_head_kv < 1 || head_dim < 1)
    throw Error(fmt::format("KV cache: bad shape n_layer {} n_head_kv {} head_dim {}", n_layer, n_head_kv, head_dim));
  if (layer_window.size() != static_cast<size_t>(n_layer))
    throw Error(fmt::format("KV cache: {} layer windows for {} layers", layer_window.size(), n_layer));
  layers_.resize(static_cast<size_t>(n_layer));
  for (int il = 0; il < n_layer; ++il) {
    auto& L = layers_[static_cast<size_t>(il)];
    L.layer = il;
    L.window = layer_window[static_cast<size_t>(il)];
    if (L.window < 0) throw Error(fmt::format("KV cache: layer {} window {} must be >= 0", il, L.window));
    L.heads.reserve(static_cast<size_t>(n_head_kv));
    for (int h = 0; h < n_head_kv; ++h) L.heads.emplace_back(k_type, v_type, head_dim);
  }
}

void KVCache::make_room(int il, int64_t n_new, bool decode) {
  auto& L = layer(il);
  for (auto& h : L.heads) {
    if (L.is_swa()) {
      const int64_t keep = L.window - 1;
      if (h.size() + n_new > h.capacity() && h.size() > keep) h.drop_front(h.size() - keep);
    }
    const int64_t need = h.size() + n_new;
    if (need <= h.capacity()) continue;
    // Prefill batches reserve exactly; decode rows grow in blocks (no per-step allocation).
    int64_t cap = decode || n_new == 1 ? need + KVHeadCache::kGrowEntries - 1 : need;
    if (L.is_swa()) cap = std::min(cap, std::max(need, static_cast<int64_t>(L.window) - 1 + kSwaSlack));
    h.reserve(cap);
  }
}

size_t KVCache::bytes() const {
  size_t b = 0;
  for (const auto& L : layers_) b += L.bytes();
  return b;
}

size_t KVCache::capacity_bytes() const {
  size_t b = 0;
  for (const auto& L : layers_) b += L.capacity_bytes();
  return b;
}

KVCache KVCache::clone() const {
  std::vector<int> windows;
  for (const auto& L : layers_) windows.push_back(L.window);
  KVCache c(n_layer(), n_head_kv_, head_dim_, k_type_, v_type_, windows);
  for (size_t il = 0; il < layers_.size(); ++il)
    for (size_t h = 0; h < layers_[il].heads.size(); ++h) c.layers_[il].heads[h] = layers_[il].heads[h].clone();
  return c;
}

void KVCache::clear() {
  for (auto& L : layers_)
    for (auto& h : L.heads) h.clear();
}

}  // namespace snapkv
