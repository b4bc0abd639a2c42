// snapkv: a small GGUF v3 writer (metadata of every value type, tensors, alignment) and a Q8_0
// quantizer. Used by tests (good and corrupted files), the fuzz seeds (fuzz_seeds.h) and tools/make_synthetic_gguf.
// Spec: ggml/docs/gguf.md; Q8_0 block layout: ggml-common.h `block_q8_0`.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/ggml_type.h"
#include "gguf/gguf.h"

namespace snapkv {

/// An owned metadata value to write. Scalars use `u` (unsigned ints, bool), `i` (signed ints) or
/// `f` (floats); strings own their bytes; arrays hold elements of one type `elem_type`
/// (which may be ARRAY: arrays of arrays, each inner array with its own element type).
struct GGUFWriterValue {
  GGUFValueType type = GGUFValueType::UINT8;
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0.0;
  std::string str;
  GGUFValueType elem_type = GGUFValueType::UINT8;
  std::vector<GGUFWriterValue> arr;

  static GGUFWriterValue u8(uint8_t v);
  static GGUFWriterValue i8(int8_t v);
  static GGUFWriterValue u16(uint16_t v);
  static GGUFWriterValue i16(int16_t v);
  static GGUFWriterValue u32(uint32_t v);
  static GGUFWriterValue i32(int32_t v);
  static GGUFWriterValue u64(uint64_t v);
  static GGUFWriterValue i64(int64_t v);
  static GGUFWriterValue f32(float v);
  static GGUFWriterValue f64(double v);
  static GGUFWriterValue boolean(bool v);
  static GGUFWriterValue string(std::string v);
  /// An array of `elem` values. Throws snapkv::Error if an element's type differs from `elem`.
  static GGUFWriterValue array(GGUFValueType elem, std::vector<GGUFWriterValue> elems);
};

/// Builds a GGUF v3 file in memory, then serialises it. Metadata and tensors are written in the
/// order they were added; tensor data is padded to the alignment (zero bytes).
class GGUFWriter {
 public:
  /// `alignment` must be a nonzero power of two (throws snapkv::Error otherwise). A value other
  /// than the GGUF default 32 is recorded as the `general.alignment` (uint32) key.
  explicit GGUFWriter(uint32_t alignment = 32);

  /// Adds a metadata key. Throws snapkv::Error on an empty, over-long (> 65535 bytes) or duplicate key, or on the
  /// reserved key `general.alignment` (set through the constructor).
  void add(std::string key, GGUFWriterValue value);
  void add_u8(std::string key, uint8_t v) { add(std::move(key), GGUFWriterValue::u8(v)); }
  void add_i8(std::string key, int8_t v) { add(std::move(key), GGUFWriterValue::i8(v)); }
  void add_u16(std::string key, uint16_t v) { add(std::move(key), GGUFWriterValue::u16(v)); }
  void add_i16(std::string key, int16_t v) { add(std::move(key), GGUFWriterValue::i16(v)); }
  void add_u32(std::string key, uint32_t v) { add(std::move(key), GGUFWriterValue::u32(v)); }
  void add_i32(std::string key, int32_t v) { add(std::move(key), GGUFWriterValue::i32(v)); }
  void add_u64(std::string key, uint64_t v) { add(std::move(key), GGUFWriterValue::u64(v)); }
  void add_i64(std::string key, int64_t v) { add(std::move(key), GGUFWriterValue::i64(v)); }
  void add_f32(std::string key, float v) { add(std::move(key), GGUFWriterValue::f32(v)); }
  void add_f64(std::string key, double v) { add(std::move(key), GGUFWriterValue::f64(v)); }
  void add_bool(std::string key, bool v) { add(std::move(key), GGUFWriterValue::boolean(v)); }
  void add_string(std::string key, std::string v) { add(std::move(key), GGUFWriterValue::string(std::move(v))); }
  void add_string_array(std::string key, const std::vector<std::string>& v);
  void add_f32_array(std::string key, const std::vector<float>& v);
  void add_i32_array(std::string key, const std::vector<int32_t>& v);
  void add_u32_array(std::string key, const std::vector<uint32_t>& v);

  /// Adds a tensor. `dims[0]` is the innermost dimension (a rows x cols matrix has dims {cols, rows});
  /// 1..4 dims, each >= 1, dims[0] a multiple of the type's block size, and `data` exactly the
  /// tensor's byte size. Throws snapkv::Error naming the tensor otherwise (or on a duplicate name).
  void add_tensor(std::string name, GGMLType type, std::vector<int64_t> dims, std::vector<uint8_t> data);
  /// Same, copying `data`.
  void add_tensor(std::string name, GGMLType type, std::vector<int64_t> dims, std::span<const uint8_t> data);
  /// F32 convenience: copies `values` (size must equal the element count).
  void add_tensor_f32(std::string name, std::vector<int64_t> dims, std::span<const float> values);

  uint32_t alignment() const { return alignment_; }
  size_t n_tensors() const { return tensors_.size(); }
  size_t n_metadata() const { return kvs_.size(); }

  /// The complete file image.
  std::vector<uint8_t> to_bytes() const;
  /// Writes the file to `path` (through `<path>.tmp` + rename). Returns the bytes written.
  /// Throws snapkv::Error naming the path on I/O failure.
  uint64_t write(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    GGMLType type;
    std::vector<int64_t> dims;
    std::vector<uint8_t> data;
  };
  /// Emits the file image through `put` (called with consecutive byte ranges).
  void serialize(const std::function<void(const void*, size_t)>& put) const;

  uint32_t alignment_;
  std::vector<std::pair<std::string, GGUFWriterValue>> kvs_;
  std::vector<Tensor> tensors_;
};

/// Quantizes `n` floats (n a multiple of 32, else snapkv::Error) to Q8_0 as ggml does
/// (quantize_row_q8_0_ref): per block of 32, d = max|x| / 127 stored as f16, q[j] = round(x[j] * (1 / d))
/// as int8 (0 when d == 0). Layout per block: f16 d (2 bytes, little-endian) then int8 q[32].
std::vector<uint8_t> quantize_q8_0(const float* x, int64_t n);

/// Writes the Q8_0 blocks of `n` floats to `out` (n / 32 * 34 bytes). Same rules as quantize_q8_0.
void quantize_q8_0_into(const float* x, int64_t n, uint8_t* out);

}  // namespace snapkv
