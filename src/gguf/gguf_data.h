// snapkv: internal state of a parsed GGUF file, shared by the parser and GGUFFile.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gguf/gguf.h"

namespace snapkv::detail {

/// Everything the parser extracts from a GGUF image. String views and tensor data pointers
/// point into the image, which must outlive this object.
struct GGUFData {
  std::string name;  ///< file name used in error messages
  const uint8_t* base = nullptr;
  uint64_t size = 0;
  uint32_t version = 0;
  uint64_t alignment = 32;
  uint64_t data_offset = 0;
  std::vector<std::pair<std::string, GGUFValue>> metadata;
  std::unordered_map<std::string_view, size_t> kv_index;  ///< keys point into `metadata`
  std::vector<GGUFTensorInfo> tensors;
  std::unordered_map<std::string_view, size_t> tensor_index;  ///< keys point into `tensors`
};

/// Parses and validates the image [out.base, out.base + out.size) into `out` (name/base/size
/// must be set). Throws snapkv::Error "<name>: <what> (<field>=<value>)" on any defect.
/// Spec: ggml/docs/gguf.md (GGUF v2/v3, little-endian).
void parse_gguf(GGUFData& out);

}  // namespace snapkv::detail
