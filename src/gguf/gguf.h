// snapkv: read-only, validating, memory-mapped GGUF reader (GGUF v2 and v3).
// Spec: ggml/docs/gguf.md (header, metadata key/value pairs, tensor infos, aligned data section).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/ggml_type.h"

namespace snapkv {

/// Metadata value types as numbered by the GGUF spec.
enum class GGUFValueType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};

/// Name of a value type ("uint32", "array", ...).
const char* gguf_value_type_name(GGUFValueType t);

/// One metadata value. Scalars are held converted; strings point into the mapped file.
/// Arrays hold their elements (possibly arrays themselves: nested arrays are allowed).
struct GGUFValue {
  GGUFValueType type = GGUFValueType::UINT8;
  uint64_t u = 0;                                  ///< unsigned integers and bool
  int64_t i = 0;                                   ///< signed integers
  double f = 0.0;                                  ///< FLOAT32 / FLOAT64
  std::string_view str;                            ///< STRING (bytes inside the mapping; not NUL-terminated)
  GGUFValueType elem_type = GGUFValueType::UINT8;  ///< ARRAY: element type
  std::vector<GGUFValue> arr;                      ///< ARRAY: elements

  bool is_integer() const;
  bool is_float() const { return type == GGUFValueType::FLOAT32 || type == GGUFValueType::FLOAT64; }
};

/// A tensor described by the file. dims[0] is the innermost (contiguous) dimension, as in ggml:
/// a weight matrix of `rows` outputs x `cols` inputs has dims = {cols, rows}.
struct GGUFTensorInfo {
  std::string name;
  uint32_t type = 0;              ///< raw GGMLType id (known to ggml_type_known(); maybe unsupported)
  std::vector<int64_t> dims;      ///< 1..4 dimensions, each >= 1
  uint64_t offset = 0;            ///< byte offset relative to the data section (aligned)
  uint64_t nbytes = 0;            ///< bytes of the tensor data
  const uint8_t* data = nullptr;  ///< start of the data inside the mapping

  int64_t n_elements() const;
  GGMLType ggml_type() const { return static_cast<GGMLType>(type); }
};

/// A parsed GGUF file. Everything is validated in open()/from_memory(): afterwards every
/// string, array and tensor byte range is known to lie inside the file.
/// Movable, not copyable; the mapping lives as long as the object.
class GGUFFile {
 public:
  /// Maps and parses `path`. Throws snapkv::Error naming the file, the field and the bad value
  /// (bad magic, unsupported version, truncated data, counts/lengths out of range, overflow,
  /// unknown value or tensor types, duplicate keys/tensors, tensor data outside the file, ...).
  static GGUFFile open(const std::string& path);

  /// Parses an in-memory image (copied). `name` stands for the file name in errors. For fuzzing/tests.
  static GGUFFile from_memory(std::span<const uint8_t> bytes, const std::string& name = "<memory>");

  GGUFFile(GGUFFile&&) noexcept;
  GGUFFile& operator=(GGUFFile&&) noexcept;
  ~GGUFFile();

  const std::string& path() const;
  uint32_t version() const;
  uint64_t file_size() const;
  /// The whole file image (mapping or owned copy), file_size() bytes; valid while this object lives.
  std::span<const uint8_t> bytes() const;
  /// True when bytes() is a read-only private mapping of the file (open), false for an owned copy
  /// (from_memory): only a mapping may have its pages dropped (madvise) and read again on demand.
  bool mapped() const;
  uint64_t alignment() const;    ///< general.alignment or 32
  uint64_t data_offset() const;  ///< start of the tensor data section, in bytes

  /// Metadata in file order.
  const std::vector<std::pair<std::string, GGUFValue>>& metadata() const;
  const GGUFValue* find(std::string_view key) const;  ///< nullptr if absent
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed getters. Integer getters accept any integer type (and bool) that fits the result;
  // float getters accept FLOAT32/FLOAT64 and integers. Each throws snapkv::Error
  // ("<file>: metadata key '<key>' is missing" / "... has type string, expected an integer" /
  // "... value -1 out of range") when the key is absent or of the wrong type.
  uint64_t get_u64(std::string_view key) const;
  int64_t get_i64(std::string_view key) const;
  double get_f64(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  std::string_view get_string(std::string_view key) const;
  std::optional<uint64_t> get_u64_opt(std::string_view key) const;
  std::optional<double> get_f64_opt(std::string_view key) const;
  std::optional<bool> get_bool_opt(std::string_view key) const;
  std::optional<std::string_view> get_string_opt(std::string_view key) const;
  /// Array getters: throw if the key is absent, not an array, or of another element type.
  std::vector<std::string_view> get_string_array(std::string_view key) const;
  std::vector<float> get_f32_array(std::string_view key) const;    ///< any float/int elements
  std::vector<int64_t> get_i64_array(std::string_view key) const;  ///< any integer elements

  const std::vector<GGUFTensorInfo>& tensors() const;
  const GGUFTensorInfo* find_tensor(std::string_view name) const;  ///< nullptr if absent
  /// Like find_tensor, but throws "<file>: tensor '<name>' is missing".
  const GGUFTensorInfo& tensor(std::string_view name) const;

 private:
  GGUFFile();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace snapkv
