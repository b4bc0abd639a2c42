// Test helper: a byte-exact GGUF encoder whose every field can be set to a bad value, for the
// corrupted-file tests (the real GGUFWriter refuses to write invalid files).
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"
#include "snapkv/error.h"

namespace snapkv::test {

/// Little-endian byte string builder.
struct Bytes {
  std::vector<uint8_t> b;
  template <typename T>
  Bytes& pod(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof(T));
    return *this;
  }
  Bytes& u8(uint8_t v) { return pod(v); }
  Bytes& u32(uint32_t v) { return pod(v); }
  Bytes& u64(uint64_t v) { return pod(v); }
  Bytes& str(std::string_view s) {
    u64(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& raw(const std::vector<uint8_t>& o) {
    b.insert(b.end(), o.begin(), o.end());
    return *this;
  }
};

/// One metadata entry: key, raw value type id, and the encoded value (payload only).
struct RawKV {
  std::string key;
  uint32_t type;
  std::vector<uint8_t> payload;
};

/// One tensor info with raw (possibly invalid) fields.
struct RawTensor {
  std::string name;
  uint32_t n_dims;
  std::vector<uint64_t> dims;
  uint32_t type;
  uint64_t offset;
};

/// A whole file. Counts default to the real number of entries; the data section is `data_bytes`
/// bytes of a repeating pattern placed at the aligned end of the tensor infos.
struct RawFile {
  uint32_t magic = 0x46554747u;
  uint32_t version = 3;
  std::optional<uint64_t> n_tensors;
  std::optional<uint64_t> n_kv;
  std::vector<RawKV> kvs;
  std::vector<RawTensor> tensors;
  uint64_t alignment = 32;
  uint64_t data_bytes = 0;

  std::vector<uint8_t> encode() const {
    Bytes o;
    o.u32(magic).u32(version).u64(n_tensors.value_or(tensors.size())).u64(n_kv.value_or(kvs.size()));
    for (const auto& kv : kvs) {
      o.str(kv.key).u32(kv.type);
      o.raw(kv.payload);
    }
    for (const auto& t : tensors) {
      o.str(t.name).u32(t.n_dims);
      for (uint64_t d : t.dims) o.u64(d);
      o.u32(t.type).u64(t.offset);
    }
    if (data_bytes > 0) {
      while (o.b.size() % alignment != 0) o.u8(0);
      for (uint64_t k = 0; k < data_bytes; ++k) o.u8(static_cast<uint8_t>(k * 7 + 1));
    }
    return o.b;
  }
};

inline std::vector<uint8_t> payload_u32(uint32_t v) { return Bytes().u32(v).b; }
inline std::vector<uint8_t> payload_str(std::string_view s) { return Bytes().str(s).b; }

/// A small valid file touching every value type, a nested array and two tensors; its last tensor
/// ends exactly at the end of the file (so every strict prefix is invalid).
inline RawFile tiny_valid_file() {
  RawFile f;
  f.kvs.push_back({"general.architecture", 8, payload_str("llama")});
  f.kvs.push_back({"t.u8", 0, Bytes().u8(200).b});
  f.kvs.push_back({"t.i8", 1, Bytes().pod<int8_t>(-5).b});
  f.kvs.push_back({"t.u16", 2, Bytes().pod<uint16_t>(60000).b});
  f.kvs.push_back({"t.i16", 3, Bytes().pod<int16_t>(-30000).b});
  f.kvs.push_back({"t.u32", 4, payload_u32(4000000000u)});
  f.kvs.push_back({"t.i32", 5, Bytes().pod<int32_t>(-2000000000).b});
  f.kvs.push_back({"t.f32", 6, Bytes().pod<float>(1.5f).b});
  f.kvs.push_back({"t.bool", 7, Bytes().u8(1).b});
  f.kvs.push_back({"t.u64", 10, Bytes().u64(~0ull).b});
  f.kvs.push_back({"t.i64", 11, Bytes().pod<int64_t>(-1).b});
  f.kvs.push_back({"t.f64", 12, Bytes().pod<double>(-2.25).b});
  // array of 2 arrays: [["ab", "c"], []] (inner arrays of strings)
  f.kvs.push_back({"t.nested", 9, Bytes().u32(9).u64(2).u32(8).u64(2).str("ab").str("c").u32(8).u64(0).b});
  f.kvs.push_back({"t.arr_i32", 9, Bytes().u32(5).u64(3).pod<int32_t>(1).pod<int32_t>(-2).pod<int32_t>(3).b});
  f.tensors.push_back({"a", 2, {32, 2}, 8, 0});  // Q8_0, 2 blocks = 68 bytes
  f.tensors.push_back({"b", 1, {4}, 0, 96});     // F32, 16 bytes
  f.data_bytes = 96 + 16;
  return f;
}

/// Parses `bytes` and returns the error message, or "" if it parsed.
inline std::string parse_error(const std::vector<uint8_t>& bytes, const std::string& name = "bad.gguf") {
  try {
    (void)GGUFFile::from_memory(bytes, name);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace snapkv::test
