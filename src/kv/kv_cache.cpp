// Ragged per-head KV cache (see kv/kv_cache.h).
#include "kv/kv_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

#include "core/kv_rows.h"
#include "quant/quant.h"
#include "snapkv/error.h"

namespace snapkv {

namespace {

constexpr std::align_val_t kAlign{64};

void* alloc_bytes(size_t n) { return n ? ::operator new(n, kAlign) : nullptr; }
void free_bytes(void* p) {
  if (p) ::operator delete(p, kAlign);
}

}  // namespace

KVHeadCache::KVHeadCache(KVType type, int head_dim) : type_(type), head_dim_(head_dim) {
  if (head_dim < 1) throw Error(fmt::format("KV cache: head_dim {} must be >= 1", head_dim));
  if (!kv_type_supports(type, head_dim))
    throw Error(fmt::format("KV cache: type {} needs head_dim a multiple of {}, got {}", kv_type_name(type), kKVQ8Block,
                            head_dim));
}

KVHeadCache::KVHeadCache(KVHeadCache&& o) noexcept
    : type_(o.type_),
      head_dim_(o.head_dim_),
      n_(std::exchange(o.n_, 0)),
      cap_(std::exchange(o.cap_, 0)),
      pos_(std::exchange(o.pos_, nullptr)),
      k_(std::exchange(o.k_, nullptr)),
      v_(std::exchange(o.v_, nullptr)) {}

KVHeadCache& KVHeadCache::operator=(KVHeadCache&& o) noexcept {
  if (this != &o) {
    clear();
    type_ = o.type_;
    head_dim_ = o.head_dim_;
    n_ = std::exchange(o.n_, 0);
    cap_ = std::exchange(o.cap_, 0);
    pos_ = std::exchange(o.pos_, nullptr);
    k_ = std::exchange(o.k_, nullptr);
    v_ = std::exchange(o.v_, nullptr);
  }
  return *this;
}

KVHeadCache::~KVHeadCache() { clear(); }

size_t KVHeadCache::row_bytes() const { return kv_row_bytes(type_, head_dim_); }

RowsView KVHeadCache::keys() const { return RowsView{k_, type_, n_, head_dim_}; }
RowsView KVHeadCache::values() const { return RowsView{v_, type_, n_, head_dim_}; }

void KVHeadCache::key_row(int64_t i, float* out) const {
  if (i < 0 || i >= n_) throw Error(fmt::format("KV cache: key row {} out of range (size {})", i, n_));
  keys().row(i, out);
}

void KVHeadCache::value_row(int64_t i, float* out) const {
  if (i < 0 || i >= n_) throw Error(fmt::format("KV cache: value row {} out of range (size {})", i, n_));
  values().row(i, out);
}

void KVHeadCache::reallocate(int64_t new_cap) {
  const size_t rb = row_bytes();
  auto* np = static_cast<int32_t*>(alloc_bytes(static_cast<size_t>(new_cap) * sizeof(int32_t)));
  void* nk = alloc_bytes(static_cast<size_t>(new_cap) * rb);
  void* nv = alloc_bytes(static_cast<size_t>(new_cap) * rb);
  if (n_ > 0) {
    std::memcpy(np, pos_, static_cast<size_t>(n_) * sizeof(int32_t));
    std::memcpy(nk, k_, static_cast<size_t>(n_) * rb);
    std::memcpy(nv, v_, static_cast<size_t>(n_) * rb);
  }
  free_bytes(pos_);
  free_bytes(k_);
  free_bytes(v_);
  pos_ = np;
  k_ = nk;
  v_ = nv;
  cap_ = new_cap;
}

void KVHeadCache::reserve(int64_t n) {
  if (n > cap_) reallocate(n);
}

void KVHeadCache::append(int64_t count, const int32_t* pos, const float* k, int64_t k_stride, const float* v,
                         int64_t v_stride) {
  if (count <= 0) return;
  int32_t last = n_ > 0 ? pos_[n_ - 1] : -1;
  for (int64_t i = 0; i < count; ++i) {
    if (pos[i] <= last)
      throw Error(fmt::format("KV cache: appended position {} is not after the last stored position {}", pos[i], last));
    last = pos[i];
  }
  if (n_ + count > cap_) reallocate(n_ + std::max(count, kGrowEntries));
  std::memcpy(pos_ + n_, pos, static_cast<size_t>(count) * sizeof(int32_t));
  for (int64_t i = 0; i < count; ++i) {
    const int64_t r = n_ + i;
    if (type_ == KVType::F16) {
      fp32_to_fp16_row(k + i * k_stride, static_cast<uint16_t*>(k_) + r * head_dim_, head_dim_);
      fp32_to_fp16_row(v + i * v_stride, static_cast<uint16_t*>(v_) + r * head_dim_, head_dim_);
    } else if (kv_type_quantized(type_)) {
      const size_t off = static_cast<size_t>(r) * row_bytes();
      quantize_kv_row(type_, k + i * k_stride, static_cast<uint8_t*>(k_) + off, head_dim_);
      quantize_kv_row(type_, v + i * v_stride, static_cast<uint8_t*>(v_) + off, head_dim_);
    } else {
      std::memcpy(static_cast<float*>(k_) + r * head_dim_, k + i * k_stride, row_bytes());
      std::memcpy(static_cast<float*>(v_) + r * head_dim_, v + i * v_stride, row_bytes());
    }
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
  const int64_t m = static_cast<int64_t>(indices.size());
  const size_t rb = row_bytes();
  auto* np = static_cast<int32_t*>(alloc_bytes(static_cast<size_t>(m) * sizeof(int32_t)));
  auto* nk = static_cast<uint8_t*>(alloc_bytes(static_cast<size_t>(m) * rb));
  auto* nv = static_cast<uint8_t*>(alloc_bytes(static_cast<size_t>(m) * rb));
  const auto* ok = static_cast<const uint8_t*>(k_);
  const auto* ov = static_cast<const uint8_t*>(v_);
  for (int64_t j = 0; j < m; ++j) {
    const auto i = static_cast<size_t>(indices[static_cast<size_t>(j)]);
    np[j] = pos_[i];
    std::memcpy(nk + static_cast<size_t>(j) * rb, ok + i * rb, rb);
    std::memcpy(nv + static_cast<size_t>(j) * rb, ov + i * rb, rb);
  }
  free_bytes(pos_);
  free_bytes(k_);
  free_bytes(v_);
  pos_ = np;
  k_ = nk;
  v_ = nv;
  n_ = m;
  cap_ = m;
}

void KVHeadCache::assign(int64_t n, const int32_t* pos, const void* k, const void* v) {
  if (n < 0) throw Error(fmt::format("KV cache: assign() of {} entries", n));
  for (int64_t i = 0; i < n; ++i)
    if (pos[i] < 0 || (i > 0 && pos[i] <= pos[i - 1]))
      throw Error(fmt::format("KV cache: assign(): position {} at entry {} is negative or not ascending", pos[i], i));
  clear();
  if (n == 0) return;
  reallocate(n);
  const size_t rb = row_bytes();
  std::memcpy(pos_, pos, static_cast<size_t>(n) * sizeof(int32_t));
  std::memcpy(k_, k, static_cast<size_t>(n) * rb);
  std::memcpy(v_, v, static_cast<size_t>(n) * rb);
  n_ = n;
}

KVHeadCache KVHeadCache::clone() const {
  KVHeadCache c(type_, head_dim_);
  if (n_ > 0) {
    c.reallocate(n_);
    const size_t rb = row_bytes();
    std::memcpy(c.pos_, pos_, static_cast<size_t>(n_) * sizeof(int32_t));
    std::memcpy(c.k_, k_, static_cast<size_t>(n_) * rb);
    std::memcpy(c.v_, v_, static_cast<size_t>(n_) * rb);
    c.n_ = n_;
  }
  return c;
}

void KVHeadCache::drop_front(int64_t count) {
  if (count <= 0) return;
  if (count > n_) throw Error(fmt::format("KV cache: drop_front({}) of only {} entries", count, n_));
  const size_t rb = row_bytes();
  const auto rest = static_cast<size_t>(n_ - count);
  std::memmove(pos_, pos_ + count, rest * sizeof(int32_t));
  std::memmove(k_, static_cast<uint8_t*>(k_) + static_cast<size_t>(count) * rb, rest * rb);
  std::memmove(v_, static_cast<uint8_t*>(v_) + static_cast<size_t>(count) * rb, rest * rb);
  n_ -= count;
}

void KVHeadCache::clear() {
  free_bytes(pos_);
  free_bytes(k_);
  free_bytes(v_);
  pos_ = nullptr;
  k_ = v_ = nullptr;
  n_ = cap_ = 0;
}

size_t KVHeadCache::bytes() const { return static_cast<size_t>(n_) * 2 * row_bytes(); }
size_t KVHeadCache::capacity_bytes() const { return static_cast<size_t>(cap_) * 2 * row_bytes(); }

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

KVCache::KVCache(int n_layer, int n_head_kv, int head_dim, KVType type, const std::vector<int>& layer_window)
    : n_head_kv_(n_head_kv), head_dim_(head_dim), type_(type) {
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
    for (int h = 0; h < n_head_kv; ++h) L.heads.emplace_back(type, head_dim);
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
  KVCache c(n_layer(), n_head_kv_, head_dim_, type_, windows);
  for (size_t il = 0; il < layers_.size(); ++il)
    for (size_t h = 0; h < layers_[il].heads.size(); ++h) c.layers_[il].heads[h] = layers_[il].heads[h].clone();
  return c;
}

void KVCache::clear() {
  for (auto& L : layers_)
    for (auto& h : L.heads) h.clear();
}

}  // namespace snapkv
