#include "core/ggml_type.h"

#include <fmt/format.h>

#include <array>

#include "snapkv/error.h"

namespace snapkv {
namespace {

// Block layouts from the GGUF spec / ggml-common.h. QK_K = 256 for the K-quants.
constexpr size_t kMaxType = 40;
struct Entry {
  bool known;
  GGMLTypeTraits t;
};

constexpr std::array<Entry, kMaxType> make_table() {
  std::array<Entry, kMaxType> a{};
  auto set = [&a](uint32_t id, const char* name, int64_t bs, size_t ts) { a[id] = Entry{true, {name, bs, ts}}; };
  set(0, "F32", 1, 4);
  set(1, "F16", 1, 2);
  set(2, "Q4_0", 32, 2 + 16);
  set(3, "Q4_1", 32, 2 + 2 + 16);
  set(6, "Q5_0", 32, 2 + 4 + 16);
  set(7, "Q5_1", 32, 2 + 2 + 4 + 16);
  set(8, "Q8_0", 32, 2 + 32);
  set(9, "Q8_1", 32, 4 + 32);
  set(10, "Q2_K", 256, 256 / 16 + 256 / 4 + 2 + 2);
  set(11, "Q3_K", 256, 256 / 8 + 256 / 4 + 12 + 2);
  set(12, "Q4_K", 256, 2 + 2 + 12 + 256 / 2);
  set(13, "Q5_K", 256, 2 + 2 + 12 + 256 / 8 + 256 / 2);
  set(14, "Q6_K", 256, 256 / 2 + 256 / 4 + 256 / 16 + 2);
  set(15, "Q8_K", 256, 4 + 256 + 256 / 16 * 2);
  set(16, "IQ2_XXS", 256, 2 + 256 / 8 * 2);
  set(17, "IQ2_XS", 256, 2 + 256 / 8 * 2 + 256 / 32);
  set(18, "IQ3_XXS", 256, 2 + 256 / 4 + 256 / 8);
  set(19, "IQ1_S", 256, 2 + 256 / 8 + 256 / 16);
  set(20, "IQ4_NL", 32, 2 + 16);
  set(21, "IQ3_S", 256, 2 + 256 / 4 + 256 / 8 + 256 / 32 + 4);
  set(22, "IQ2_S", 256, 2 + 256 / 4 + 256 / 16);
  set(23, "IQ4_XS", 256, 2 + 2 + 256 / 64 + 256 / 2);
  set(24, "I8", 1, 1);
  set(25, "I16", 1, 2);
  set(26, "I32", 1, 4);
  set(27, "I64", 1, 8);
  set(28, "F64", 1, 8);
  set(29, "IQ1_M", 256, 256 / 8 + 256 / 16 + 256 / 32);
  set(30, "BF16", 1, 2);
  set(34, "TQ1_0", 256, 2 + 4 * 13);
  set(35, "TQ2_0", 256, 2 + 64);
  return a;
}
constexpr auto kTable = make_table();

}  // namespace

bool ggml_type_known(uint32_t id) { return id < kMaxType && kTable[id].known; }

const GGMLTypeTraits& ggml_type_traits(uint32_t id) {
  if (!ggml_type_known(id)) throw Error(fmt::format("unknown GGML tensor type id {}", id));
  return kTable[id].t;
}

std::string ggml_type_name(uint32_t id) {
  if (!ggml_type_known(id)) return fmt::format("unknown({})", id);
  return kTable[id].t.name;
}

bool ggml_type_supported(GGMLType t) {
  switch (t) {
    case GGMLType::F32:
    case GGMLType::F16:
    case GGMLType::BF16:
    case GGMLType::Q8_0:
    case GGMLType::Q4_0:
    case GGMLType::Q4_1:
    case GGMLType::Q5_0:
    case GGMLType::Q5_1:
    case GGMLType::Q4_K:
    case GGMLType::Q5_K:
    case GGMLType::Q6_K:
      return true;
    default:
      return false;
  }
}

size_t ggml_row_bytes(GGMLType t, int64_t n) {
  const auto& tr = ggml_type_traits(static_cast<uint32_t>(t));
  if (n < 0 || n % tr.block_size != 0) {
    throw Error(fmt::format("row of {} elements is not a multiple of the {} block size {}", n, tr.name, tr.block_size));
  }
  return static_cast<size_t>(n / tr.block_size) * tr.type_size;
}

}  // namespace snapkv
