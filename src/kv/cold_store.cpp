// snapkv: the cold tier (cold_store.h).
#include "kv/cold_store.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>

#include "core/fp16.h"
#include "kv/kv_cache.h"
#include "snapkv/error.h"

namespace snapkv {

/// One stored layer: [n_head_kv][K rows n, V rows n], each row cold_row_bytes(); in `heap` or in
/// a read-only mapping of the store's file (`map`, `map_len`).
struct ColdStore::LayerRows {
  int64_t n = 0;
  std::vector<unsigned char> heap;
  void* map = nullptr;
  size_t map_len = 0;
  size_t bytes = 0;  ///< payload bytes (the mapping may be longer: page padding)
  const unsigned char* data() const { return map ? static_cast<const unsigned char*>(map) : heap.data(); }
};

ColdTierOptions parse_cold_tier(const std::string& value) {
  ColdTierOptions o;
  o.enabled = true;
  if (value == "int8") return o;
  if (value == "f16") {
    o.format = ColdFormat::F16;
    return o;
  }
  if (value.rfind("disk:", 0) == 0 && value.size() > 5) {
    o.dir = value.substr(5);
    return o;
  }
  throw Error(fmt::format("cold tier '{}': expected int8, f16 or disk:DIR", value));
}

std::string cold_tier_name(const ColdTierOptions& o) {
  if (!o.enabled) return "off";
  if (!o.dir.empty()) return (o.format == ColdFormat::F16 ? "f16,disk:" : "disk:") + o.dir;
  return o.format == ColdFormat::F16 ? "f16" : "int8";
}

size_t cold_row_bytes(ColdFormat format, int head_dim) {
  const auto hd = static_cast<size_t>(head_dim);
  return format == ColdFormat::Int8 ? hd + sizeof(float) : 2 * hd;
}

void check_cold_tier_dir(const ColdTierOptions& o) {
  if (o.dir.empty()) return;
  std::string name = o.dir + "/snapkv-cold-XXXXXX";
  const int fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0)
    throw ColdTierIOError(fmt::format("cold tier: cannot create a file in {}: {}", o.dir, std::strerror(errno)));
  ::unlink(name.c_str());
  ::close(fd);
}

ColdStore::ColdStore(int n_layer, int n_head_kv, int head_dim, ColdTierOptions opt)
    : n_layer_(n_layer), n_head_kv_(n_head_kv), head_dim_(head_dim), opt_(std::move(opt)) {
  if (n_layer <= 0 || n_head_kv <= 0 || head_dim <= 0)
    throw Error(fmt::format("cold store: bad shape {} layers x {} KV heads x {} dims", n_layer, n_head_kv, head_dim));
  layers_.resize(static_cast<size_t>(n_layer));
  if (!opt_.dir.empty()) {
    // The file is unlinked at once: the descriptor and the mappings keep it alive, and nothing is
    // left behind when the process ends, however it ends.
    std::string name = opt_.dir + "/snapkv-cold-XXXXXX";
    fd_ = ::mkostemp(name.data(), O_CLOEXEC);
    if (fd_ < 0)
      throw ColdTierIOError(fmt::format("cold tier: cannot create a file in {}: {}", opt_.dir, std::strerror(errno)));
    ::unlink(name.c_str());
  }
}

ColdStore::~ColdStore() {
  for (auto& l : layers_)
    if (l && l->map) ::munmap(l->map, l->map_len);
  if (fd_ >= 0) ::close(fd_);
}

namespace {

// One row of head_dim f32 values into the cold format at dst.
void encode_row(ColdFormat f, const float* x, int hd, unsigned char* dst) {
  if (f == ColdFormat::F16) {
    auto* d = reinterpret_cast<uint16_t*>(dst);
    for (int i = 0; i < hd; ++i) d[i] = fp32_to_fp16(x[i]);
    return;
  }
  float amax = 0.0f;
  bool finite = true;
  for (int i = 0; i < hd; ++i) {
    finite = finite && std::isfinite(x[i]);
    amax = std::max(amax, std::fabs(x[i]));
  }
  auto* q = reinterpret_cast<int8_t*>(dst + sizeof(float));
  // A row with inf or NaN decodes as NaN (no silent finite value); a row below the smallest
  // normal scale (max|x| < 127 FLT_MIN) as zeros.
  float scale = finite ? amax / 127.0f : std::numeric_limits<float>::quiet_NaN();
  if (finite && scale < std::numeric_limits<float>::min()) scale = 0.0f;
  std::memcpy(dst, &scale, sizeof(float));
  for (int i = 0; i < hd; ++i)
    q[i] = scale > 0.0f ? static_cast<int8_t>(std::lrintf(std::clamp(x[i] / scale, -127.0f, 127.0f))) : 0;
}

void decode_row(ColdFormat f, const unsigned char* src, int hd, float* out) {
  if (f == ColdFormat::F16) {
    uint16_t h[1];
    for (int i = 0; i < hd; ++i) {
      std::memcpy(h, src + 2 * static_cast<size_t>(i), 2);
      out[i] = fp16_to_fp32(h[0]);
    }
    return;
  }
  float scale;
  std::memcpy(&scale, src, sizeof(float));
  const auto* q = reinterpret_cast<const int8_t*>(src + sizeof(float));
  for (int i = 0; i < hd; ++i) out[i] = static_cast<float>(q[i]) * scale;
}

}  // namespace

void ColdStore::put_layer(const KVLayerCache& layer) {
  const int il = layer.layer;
  if (static_cast<int>(layer.heads.size()) != n_head_kv_)
    throw Error(fmt::format("cold store: layer {} has {} KV heads, expected {}", il, layer.heads.size(), n_head_kv_));
  const int64_t n = layer.heads.empty() ? 0 : layer.heads[0].size();
  for (int h = 0; h < n_head_kv_; ++h) {
    const KVHeadCache& hc = layer.heads[static_cast<size_t>(h)];
    if (hc.head_dim() != head_dim_ || hc.size() != n)
      throw Error(fmt::format("cold store: layer {} head {} holds {} entries of {} dims, expected {} of {}", il, h,
                              hc.size(), hc.head_dim(), n, head_dim_));
    const auto pos = hc.positions();
    for (int64_t i = 0; i < n; ++i)
      if (pos[static_cast<size_t>(i)] != i)
        throw Error(fmt::format("cold store: layer {} head {}: entry {} has position {}, expected the prompt's {}", il,
                                h, i, pos[static_cast<size_t>(i)], i));
  }
  // Encoded row by row straight from the heads (no f32 copy of the layer).
  store(il, n, [&layer](int h, bool value, int64_t i, float* row) {
    const KVHeadCache& hc = layer.heads[static_cast<size_t>(h)];
    value ? hc.value_row(i, row) : hc.key_row(i, row);
  });
}

void ColdStore::put_rows(int il, int64_t n, const float* k, const float* v) {
  const auto hd = static_cast<size_t>(head_dim_);
  store(il, n, [&](int h, bool value, int64_t i, float* row) {
    const float* src =
        (value ? v : k) + (static_cast<size_t>(h) * static_cast<size_t>(n) + static_cast<size_t>(i)) * hd;
    std::memcpy(row, src, sizeof(float) * hd);
  });
}

void ColdStore::check_new_layer(int il, int64_t n) const {
  if (il < 0 || il >= n_layer_) throw Error(fmt::format("cold store: layer {} outside [0, {})", il, n_layer_));
  if (layers_[static_cast<size_t>(il)]) throw Error(fmt::format("cold store: layer {} is already stored", il));
  if (n <= 0) throw Error(fmt::format("cold store: layer {} has no entries", il));
}

void ColdStore::put_encoded(int il, int64_t n, std::span<const unsigned char> bytes) {
  check_new_layer(il, n);
  const size_t want =
      static_cast<size_t>(n_head_kv_) * 2 * static_cast<size_t>(n) * cold_row_bytes(opt_.format, head_dim_);
  if (bytes.size() != want)
    throw Error(
        fmt::format("cold store: layer {} of {} rows needs {} encoded bytes, got {}", il, n, want, bytes.size()));
  auto lr = std::make_unique<LayerRows>();
  lr->n = n;
  lr->bytes = want;
  lr->heap.assign(bytes.begin(), bytes.end());
  place(il, std::move(lr));
}

std::span<const unsigned char> ColdStore::encoded_layer(int il) const {
  if (!has_layer(il)) return {};
  const LayerRows& lr = *layers_[static_cast<size_t>(il)];
  return {lr.data(), lr.bytes};
}

void ColdStore::store(int il, int64_t n, const std::function<void(int, bool, int64_t, float*)>& row_of) {
  check_new_layer(il, n);
  const size_t rb = cold_row_bytes(opt_.format, head_dim_);
  auto lr = std::make_unique<LayerRows>();
  lr->n = n;
  lr->bytes = static_cast<size_t>(n_head_kv_) * 2 * static_cast<size_t>(n) * rb;
  lr->heap.resize(lr->bytes);
  std::vector<float> row(static_cast<size_t>(head_dim_));
  for (int h = 0; h < n_head_kv_; ++h)
    for (const bool value : {false, true})
      for (int64_t i = 0; i < n; ++i) {
        row_of(h, value, i, row.data());
        encode_row(opt_.format, row.data(), head_dim_,
                   lr->heap.data() + ((static_cast<size_t>(h) * 2 + (value ? 1 : 0)) * static_cast<size_t>(n) +
                                      static_cast<size_t>(i)) *
                                         rb);
      }
  place(il, std::move(lr));
}

void ColdStore::place(int il, std::unique_ptr<LayerRows> lr) {
  if (fd_ >= 0) {
    // Each layer starts on a page boundary (mmap offsets must be page-aligned).
    const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    const size_t off = (file_size_ + page - 1) / page * page;
    size_t done = 0;
    while (done < lr->bytes) {
      const ssize_t w = ::pwrite(fd_, lr->heap.data() + done, lr->bytes - done, static_cast<off_t>(off + done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0)
        throw ColdTierIOError(fmt::format("cold tier file in {}: cannot write layer {}: {}", opt_.dir, il,
                                          w < 0 ? std::strerror(errno) : "no space"));
      done += static_cast<size_t>(w);
    }
    void* m = ::mmap(nullptr, lr->bytes, PROT_READ, MAP_SHARED, fd_, static_cast<off_t>(off));
    if (m == MAP_FAILED)
      throw ColdTierIOError(
          fmt::format("cold tier file in {}: cannot map layer {}: {}", opt_.dir, il, std::strerror(errno)));
    lr->map = m;
    lr->map_len = lr->bytes;
    std::vector<unsigned char>().swap(lr->heap);
    file_size_ = off + lr->bytes;
  }
  layers_[static_cast<size_t>(il)] = std::move(lr);
}

bool ColdStore::has_layer(int il) const {
  return il >= 0 && il < n_layer_ && layers_[static_cast<size_t>(il)] != nullptr;
}

int64_t ColdStore::n_tokens(int il) const { return has_layer(il) ? layers_[static_cast<size_t>(il)]->n : 0; }

const unsigned char* ColdStore::row_ptr(const LayerRows& lr, int h, bool value, int64_t p) const {
  const size_t rb = cold_row_bytes(opt_.format, head_dim_);
  return lr.data() +
         ((static_cast<size_t>(h) * 2 + (value ? 1 : 0)) * static_cast<size_t>(lr.n) + static_cast<size_t>(p)) * rb;
}

void ColdStore::read(int il, int h, int64_t p0, int64_t count, float* k_out, float* v_out) const {
  if (!has_layer(il)) throw Error(fmt::format("cold store: layer {} is not stored", il));
  const LayerRows& lr = *layers_[static_cast<size_t>(il)];
  if (h < 0 || h >= n_head_kv_ || p0 < 0 || count < 0 || p0 + count > lr.n)
    throw Error(fmt::format("cold store: rows [{}, {}) of layer {} head {} outside the {} stored", p0, p0 + count, il,
                            h, lr.n));
  const auto hd = static_cast<size_t>(head_dim_);
  for (int64_t i = 0; i < count; ++i) {
    if (k_out) decode_row(opt_.format, row_ptr(lr, h, false, p0 + i), head_dim_, k_out + static_cast<size_t>(i) * hd);
    if (v_out) decode_row(opt_.format, row_ptr(lr, h, true, p0 + i), head_dim_, v_out + static_cast<size_t>(i) * hd);
  }
}

size_t ColdStore::bytes() const {
  size_t b = 0;
  for (const auto& l : layers_) b += l ? l->bytes : 0;
  return b;
}

size_t ColdStore::ram_bytes() const { return opt_.dir.empty() ? bytes() : 0; }

}  // namespace snapkv
