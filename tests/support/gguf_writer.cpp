// snapkv: GGUF v3 writer (ggml/docs/gguf.md) and the Q8_0 quantizer.
#include "support/gguf_writer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <unordered_set>

#include "core/q8_0_rows.h"
#include "snapkv/error.h"
// clang 14's F16C _cvtss_sh macro expands to a compound literal (-Wc99-extensions under -Wpedantic).
#if defined(__clang__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wc99-extensions"
#endif
#include "core/fp16.h"
#if defined(__clang__)
#pragma clang diagnostic pop
#endif

namespace snapkv {

// ---------------------------------------------------------------- values

namespace {
GGUFWriterValue scalar_u(GGUFValueType t, uint64_t v) {
  GGUFWriterValue r;
  r.type = t;
  r.u = v;
  return r;
}
GGUFWriterValue scalar_i(GGUFValueType t, int64_t v) {
  GGUFWriterValue r;
  r.type = t;
  r.i = v;
  return r;
}
GGUFWriterValue scalar_f(GGUFValueType t, double v) {
  GGUFWriterValue r;
  r.type = t;
  r.f = v;
  return r;
}
}  // namespace

GGUFWriterValue GGUFWriterValue::u8(uint8_t v) { return scalar_u(GGUFValueType::UINT8, v); }
GGUFWriterValue GGUFWriterValue::i8(int8_t v) { return scalar_i(GGUFValueType::INT8, v); }
GGUFWriterValue GGUFWriterValue::u16(uint16_t v) { return scalar_u(GGUFValueType::UINT16, v); }
GGUFWriterValue GGUFWriterValue::i16(int16_t v) { return scalar_i(GGUFValueType::INT16, v); }
GGUFWriterValue GGUFWriterValue::u32(uint32_t v) { return scalar_u(GGUFValueType::UINT32, v); }
GGUFWriterValue GGUFWriterValue::i32(int32_t v) { return scalar_i(GGUFValueType::INT32, v); }
GGUFWriterValue GGUFWriterValue::u64(uint64_t v) { return scalar_u(GGUFValueType::UINT64, v); }
GGUFWriterValue GGUFWriterValue::i64(int64_t v) { return scalar_i(GGUFValueType::INT64, v); }
GGUFWriterValue GGUFWriterValue::f32(float v) { return scalar_f(GGUFValueType::FLOAT32, v); }
GGUFWriterValue GGUFWriterValue::f64(double v) { return scalar_f(GGUFValueType::FLOAT64, v); }
GGUFWriterValue GGUFWriterValue::boolean(bool v) { return scalar_u(GGUFValueType::BOOL, v ? 1 : 0); }

GGUFWriterValue GGUFWriterValue::string(std::string v) {
  GGUFWriterValue r;
  r.type = GGUFValueType::STRING;
  r.str = std::move(v);
  return r;
}

GGUFWriterValue GGUFWriterValue::array(GGUFValueType elem, std::vector<GGUFWriterValue> elems) {
  for (size_t j = 0; j < elems.size(); ++j) {
    if (elems[j].type != elem) {
      throw Error(fmt::format("GGUFWriter: array element {} has type {}, expected {}", j,
                              gguf_value_type_name(elems[j].type), gguf_value_type_name(elem)));
    }
  }
  GGUFWriterValue r;
  r.type = GGUFValueType::ARRAY;
  r.elem_type = elem;
  r.arr = std::move(elems);
  return r;
}

// ---------------------------------------------------------------- writer

GGUFWriter::GGUFWriter(uint32_t alignment) : alignment_(alignment) {
  if (alignment == 0 || !std::has_single_bit(alignment)) {
    throw Error(fmt::format("GGUFWriter: alignment must be a nonzero power of two (alignment={})", alignment));
  }
}

void GGUFWriter::add(std::string key, GGUFWriterValue value) {
  if (key.empty()) throw Error("GGUFWriter: empty metadata key");
  if (key.size() > 65535) throw Error(fmt::format("GGUFWriter: metadata key too long (key length={})", key.size()));
  if (key == "general.alignment") {
    throw Error("GGUFWriter: set general.alignment through the constructor (key=general.alignment)");
  }
  for (const auto& kv : kvs_) {
    if (kv.first == key) throw Error(fmt::format("GGUFWriter: duplicate metadata key (key={})", key));
  }
  kvs_.emplace_back(std::move(key), std::move(value));
}

void GGUFWriter::add_string_array(std::string key, const std::vector<std::string>& v) {
  std::vector<GGUFWriterValue> e;
  e.reserve(v.size());
  for (const auto& s : v) e.push_back(GGUFWriterValue::string(s));
  add(std::move(key), GGUFWriterValue::array(GGUFValueType::STRING, std::move(e)));
}

void GGUFWriter::add_f32_array(std::string key, const std::vector<float>& v) {
  std::vector<GGUFWriterValue> e;
  e.reserve(v.size());
  for (float x : v) e.push_back(GGUFWriterValue::f32(x));
  add(std::move(key), GGUFWriterValue::array(GGUFValueType::FLOAT32, std::move(e)));
}

void GGUFWriter::add_i32_array(std::string key, const std::vector<int32_t>& v) {
  std::vector<GGUFWriterValue> e;
  e.reserve(v.size());
  for (int32_t x : v) e.push_back(GGUFWriterValue::i32(x));
  add(std::move(key), GGUFWriterValue::array(GGUFValueType::INT32, std::move(e)));
}

void GGUFWriter::add_u32_array(std::string key, const std::vector<uint32_t>& v) {
  std::vector<GGUFWriterValue> e;
  e.reserve(v.size());
  for (uint32_t x : v) e.push_back(GGUFWriterValue::u32(x));
  add(std::move(key), GGUFWriterValue::array(GGUFValueType::UINT32, std::move(e)));
}

void GGUFWriter::add_tensor(std::string name, GGMLType type, std::vector<int64_t> dims, std::vector<uint8_t> data) {
  if (name.empty()) throw Error("GGUFWriter: empty tensor name");
  for (const auto& t : tensors_) {
    if (t.name == name) throw Error(fmt::format("GGUFWriter: duplicate tensor (name={})", name));
  }
  if (dims.empty() || dims.size() > 4) {
    throw Error(fmt::format("GGUFWriter: tensor '{}' needs 1..4 dims (n_dims={})", name, dims.size()));
  }
  int64_t n = 1;
  for (size_t j = 0; j < dims.size(); ++j) {
    if (dims[j] < 1) throw Error(fmt::format("GGUFWriter: tensor '{}' dims[{}]={} < 1", name, j, dims[j]));
    if (__builtin_mul_overflow(n, dims[j], &n)) {
      throw Error(fmt::format("GGUFWriter: tensor '{}' element count overflows", name));
    }
  }
  size_t row = 0;
  try {
    row = ggml_row_bytes(type, dims[0]);
  } catch (const Error& e) {
    throw Error(fmt::format("GGUFWriter: tensor '{}': {}", name, e.what()));
  }
  const uint64_t expect = static_cast<uint64_t>(row) * static_cast<uint64_t>(n / dims[0]);
  if (data.size() != expect) {
    throw Error(fmt::format("GGUFWriter: tensor '{}' has {} data bytes, expected {} for {} {}", name, data.size(),
                            expect, ggml_type_name(static_cast<uint32_t>(type)), fmt::join(dims, "x")));
  }
  tensors_.push_back(Tensor{std::move(name), type, std::move(dims), std::move(data)});
}

void GGUFWriter::add_tensor(std::string name, GGMLType type, std::vector<int64_t> dims, std::span<const uint8_t> data) {
  add_tensor(std::move(name), type, std::move(dims), std::vector<uint8_t>(data.begin(), data.end()));
}

void GGUFWriter::add_tensor_f32(std::string name, std::vector<int64_t> dims, std::span<const float> values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  add_tensor(std::move(name), GGMLType::F32, std::move(dims), std::move(bytes));
}

namespace {

// Byte output with the GGUF primitive encodings; counts what it wrote (for padding).
class Out {
 public:
  explicit Out(const std::function<void(const void*, size_t)>& put) : put_(put) {}
  uint64_t written = 0;

  void put(const void* p, size_t n) {
    put_(p, n);
    written += n;
  }
  template <typename T>
  void pod(T v) {
    put(&v, sizeof(T));  // little-endian host (x86-64 / aarch64)
  }
  void str(const std::string& s) {
    pod<uint64_t>(s.size());
    put(s.data(), s.size());
  }
  void pad_to(uint64_t alignment) {
    static constexpr uint8_t kZero[64] = {};
    uint64_t n = (alignment - written % alignment) % alignment;
    while (n > 0) {
      const size_t k = n < sizeof(kZero) ? static_cast<size_t>(n) : sizeof(kZero);
      put(kZero, k);
      n -= k;
    }
  }

 private:
  const std::function<void(const void*, size_t)>& put_;
};

void put_payload(Out& out, const GGUFWriterValue& v) {
  switch (v.type) {
    case GGUFValueType::UINT8:
    case GGUFValueType::BOOL:
      out.pod<uint8_t>(static_cast<uint8_t>(v.u));
      break;
    case GGUFValueType::INT8:
      out.pod<int8_t>(static_cast<int8_t>(v.i));
      break;
    case GGUFValueType::UINT16:
      out.pod<uint16_t>(static_cast<uint16_t>(v.u));
      break;
    case GGUFValueType::INT16:
      out.pod<int16_t>(static_cast<int16_t>(v.i));
      break;
    case GGUFValueType::UINT32:
      out.pod<uint32_t>(static_cast<uint32_t>(v.u));
      break;
    case GGUFValueType::INT32:
      out.pod<int32_t>(static_cast<int32_t>(v.i));
      break;
    case GGUFValueType::UINT64:
      out.pod<uint64_t>(v.u);
      break;
    case GGUFValueType::INT64:
      out.pod<int64_t>(v.i);
      break;
    case GGUFValueType::FLOAT32:
      out.pod<float>(static_cast<float>(v.f));
      break;
    case GGUFValueType::FLOAT64:
      out.pod<double>(v.f);
      break;
    case GGUFValueType::STRING:
      out.str(v.str);
      break;
    case GGUFValueType::ARRAY:
      out.pod<uint32_t>(static_cast<uint32_t>(v.elem_type));
      out.pod<uint64_t>(v.arr.size());
      for (const auto& e : v.arr) put_payload(out, e);
      break;
  }
}

}  // namespace

void GGUFWriter::serialize(const std::function<void(const void*, size_t)>& put) const {
  Out out(put);
  const bool explicit_alignment = alignment_ != 32;
  out.pod<uint32_t>(0x46554747u);  // "GGUF"
  out.pod<uint32_t>(3);
  out.pod<uint64_t>(tensors_.size());
  out.pod<uint64_t>(kvs_.size() + (explicit_alignment ? 1 : 0));
  if (explicit_alignment) {
    out.str("general.alignment");
    out.pod<uint32_t>(static_cast<uint32_t>(GGUFValueType::UINT32));
    out.pod<uint32_t>(alignment_);
  }
  for (const auto& [key, v] : kvs_) {
    out.str(key);
    out.pod<uint32_t>(static_cast<uint32_t>(v.type));
    put_payload(out, v);
  }
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    out.str(t.name);
    out.pod<uint32_t>(static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) out.pod<uint64_t>(static_cast<uint64_t>(d));
    out.pod<uint32_t>(static_cast<uint32_t>(t.type));
    out.pod<uint64_t>(offset);
    offset += (t.data.size() + alignment_ - 1) / alignment_ * alignment_;
  }
  out.pad_to(alignment_);
  for (const auto& t : tensors_) {
    out.put(t.data.data(), t.data.size());
    out.pad_to(alignment_);
  }
}

std::vector<uint8_t> GGUFWriter::to_bytes() const {
  std::vector<uint8_t> bytes;
  serialize([&bytes](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes.insert(bytes.end(), b, b + n);
  });
  return bytes;
}

uint64_t GGUFWriter::write(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) throw Error(fmt::format("{}: cannot create file: {}", tmp, std::strerror(errno)));
  std::setvbuf(f, nullptr, _IOFBF, 1 << 20);
  uint64_t n = 0;
  try {
    serialize([&](const void* p, size_t k) {
      if (k > 0 && std::fwrite(p, 1, k, f) != k) {
        throw Error(fmt::format("{}: write failed: {}", tmp, std::strerror(errno)));
      }
      n += k;
    });
  } catch (...) {
    std::fclose(f);
    std::remove(tmp.c_str());
    throw;
  }
  if (std::fclose(f) != 0) {
    std::remove(tmp.c_str());
    throw Error(fmt::format("{}: close failed: {}", tmp, std::strerror(errno)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    throw Error(fmt::format("{}: cannot rename from {}: {}", path, tmp, std::strerror(e)));
  }
  return n;
}

// ---------------------------------------------------------------- Q8_0

void quantize_q8_0_into(const float* x, int64_t n, uint8_t* out) {
  constexpr int64_t kBlock = 32;
  if (n < 0 || n % kBlock != 0) {
    throw Error(fmt::format("quantize_q8_0: element count is not a multiple of 32 (n={})", n));
  }
  // The KV cache's codec (the same reference rounding), one block at a time (n may exceed int).
  for (int64_t b = 0; b < n / kBlock; ++b) quantize_q8_0_row(x + b * kBlock, out + b * 34, static_cast<int>(kBlock));
}

std::vector<uint8_t> quantize_q8_0(const float* x, int64_t n) {
  if (n < 0 || n % 32 != 0) {
    throw Error(fmt::format("quantize_q8_0: element count is not a multiple of 32 (n={})", n));
  }
  std::vector<uint8_t> out(static_cast<size_t>(n / 32 * 34));
  quantize_q8_0_into(x, n, out.data());
  return out;
}

}  // namespace snapkv
