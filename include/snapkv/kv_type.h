// snapkv: element type of the stored keys and values of the KV cache.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "snapkv/error.h"

namespace snapkv {

/// Element type of stored keys/values:
///  - F16: IEEE half, round-to-nearest-even on store (2 bytes per element; the default, as
///    llama.cpp's default `-ctk/-ctv f16`);
///  - F32: 4 bytes per element;
///  - Q8_0: ggml's Q8_0 blocks (ggml-common.h block_q8_0): every 32 consecutive elements of a row
///    are stored as one f16 scale d = max|x| / 127 and 32 int8 q = round(x * (1 / d)), x ~= d * q
///    (34 bytes per 32 elements, 1.0625 per element). Needs head_dim % 32 == 0. The storage of
///    llama.cpp's `-ctk/-ctv q8_0`, for keys and values alike; the attention differs: snapkv
///    multiplies the f32 query with the dequantized keys, ggml quantizes the query to Q8_0 too.
///  - Q4_0: ggml's Q4_0 blocks (ggml-common.h block_q4_0): every 32 consecutive elements are one
///    f16 scale d = m / -8 (m: the element of largest magnitude, with its sign) and 32 4-bit
///    q = min(15, trunc(x * (1 / d) + 8.5)), x ~= d * (q - 8); byte j holds element j in its low nibble
///    and element j + 16 in its high nibble (18 bytes per 32 elements, 0.5625 per element). Needs
///    head_dim % 32 == 0. The storage of llama.cpp's `-ctk/-ctv q4_0`.
enum class KVType { F16, F32, Q8_0, Q4_0 };

/// Elements per Q8_0 / Q4_0 block, and bytes per block (f16 scale + 32 int8, or + 16 nibble pairs).
inline constexpr int kKVQ8Block = 32;
inline constexpr size_t kKVQ8BlockBytes = 34;
inline constexpr int kKVQ4Block = 32;
inline constexpr size_t kKVQ4BlockBytes = 18;

/// True for the block-quantized types (Q8_0, Q4_0): rows of head_dim / 32 blocks.
inline constexpr bool kv_type_quantized(KVType t) { return t == KVType::Q8_0 || t == KVType::Q4_0; }

/// "f16", "f32", "q8_0" or "q4_0" (the names of llama.cpp's --cache-type-k/v and of `snapkv --kv-type`).
inline const char* kv_type_name(KVType t) {
  switch (t) {
    case KVType::F16:
      return "f16";
    case KVType::F32:
      return "f32";
    case KVType::Q8_0:
      return "q8_0";
    case KVType::Q4_0:
      return "q4_0";
  }
  return "?";
}

/// True when rows of `head_dim` elements can be stored as `t` (Q8_0 / Q4_0 need whole blocks of 32).
inline bool kv_type_supports(KVType t, int head_dim) {
  return head_dim > 0 && (!kv_type_quantized(t) || head_dim % kKVQ8Block == 0);
}

/// Bytes of one stored key (or value) row of `head_dim` elements of type `t`: 2 or 4 per element
/// for F16 / F32, head_dim / 32 * 34 for Q8_0, head_dim / 32 * 18 for Q4_0. One KV entry of one head holds two such
/// rows (key and value). Throws snapkv::Error when !kv_type_supports(t, head_dim) (e.g. Q8_0 with head_dim 80).
inline size_t kv_row_bytes(KVType t, int head_dim) {
  if (!kv_type_supports(t, head_dim))
    throw Error("KV row bytes: type " + std::string(kv_type_name(t)) + " cannot store rows of " +
                std::to_string(head_dim) + " elements" + (kv_type_quantized(t) ? " (needs a multiple of 32)" : ""));
  const auto n = static_cast<size_t>(head_dim);
  switch (t) {
    case KVType::F16:
      return 2 * n;
    case KVType::F32:
      return 4 * n;
    case KVType::Q8_0:
      return n / kKVQ8Block * kKVQ8BlockBytes;
    case KVType::Q4_0:
      return n / kKVQ4Block * kKVQ4BlockBytes;
  }
  return 0;
}

/// Whether keys of type `k` and values of type `v` can share a cache: equal types, or any two
/// block-quantized types (e.g. q8_0 keys with q4_0 values, llama.cpp's `-ctk q8_0 -ctv q4_0`).
/// F16 / F32 keys or values are not mixed with another type.
inline constexpr bool kv_types_combine(KVType k, KVType v) {
  return k == v || (kv_type_quantized(k) && kv_type_quantized(v));
}

/// Empty when keys of type `k` and values of type `v` can be stored in rows of `head_dim`
/// elements; otherwise a sentence saying why not (for error messages).
inline std::string kv_types_problem(KVType k, KVType v, int head_dim) {
  if (!kv_types_combine(k, v))
    return std::string("keys of type ") + kv_type_name(k) + " with values of type " + kv_type_name(v) +
           ": mixed key / value types must both be quantized (q8_0 / q4_0)";
  for (const KVType t : {k, v})
    if (!kv_type_supports(t, head_dim))
      return std::string(kv_type_name(t)) + " needs a head_dim that is a multiple of 32; this model's is " +
             std::to_string(head_dim);
  return {};
}

/// Bytes of one KV entry of one head: a key row of type `k` plus a value row of type `v`
/// (kv_row_bytes of each). Throws snapkv::Error as kv_row_bytes does.
inline size_t kv_entry_bytes(KVType k, KVType v, int head_dim) {
  return kv_row_bytes(k, head_dim) + kv_row_bytes(v, head_dim);
}

/// The KVType named `name` (as kv_type_name gives it), or nullopt for any other string.
inline std::optional<KVType> kv_type_from_name(std::string_view name) {
  if (name == "f16") return KVType::F16;
  if (name == "f32") return KVType::F32;
  if (name == "q8_0") return KVType::Q8_0;
  if (name == "q4_0") return KVType::Q4_0;
  return std::nullopt;
}

}  // namespace snapkv
