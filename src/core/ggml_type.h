// snapkv: tensor element types as numbered by GGUF/ggml (ggml.h `enum ggml_type`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace snapkv {

/// GGUF tensor type ids. Values are fixed by the GGUF spec (ggml.h); never renumber.
enum class GGMLType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
};

/// Layout facts of one type: `block_size` elements are stored in `type_size` bytes.
struct GGMLTypeTraits {
  const char* name;    ///< e.g. "Q4_K"
  int64_t block_size;  ///< elements per block (1 for plain types)
  size_t type_size;    ///< bytes per block
};

/// True if `id` is a type id GGUF defines (sizes known), whether or not snapkv computes with it.
bool ggml_type_known(uint32_t id);

/// Traits of a known type. Throws snapkv::Error naming the id if it is unknown.
const GGMLTypeTraits& ggml_type_traits(uint32_t id);

/// Name of a type id ("Q4_K"), or "unknown(<id>)".
std::string ggml_type_name(uint32_t id);

/// True if snapkv has dequantization and dot-product kernels for the type
/// (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K).
bool ggml_type_supported(GGMLType t);

/// Bytes of a row of `n` elements. Throws snapkv::Error if `n` is not a multiple of the block size.
size_t ggml_row_bytes(GGMLType t, int64_t n);

}  // namespace snapkv
