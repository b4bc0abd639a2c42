// snapkv: element type of the stored keys and values of the KV cache.
#pragma once

#include <cstddef>

namespace snapkv {

/// Element type of stored keys/values: IEEE half (round-to-nearest-even on store) or f32.
enum class KVType { F16, F32 };

/// Bytes of one element of `t`.
inline size_t kv_type_size(KVType t) { return t == KVType::F16 ? 2 : 4; }

}  // namespace snapkv
