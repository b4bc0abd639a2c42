// snapkv: validating GGUF parser. Layout (ggml/docs/gguf.md, v2/v3, little-endian):
//   u32 magic "GGUF" | u32 version | u64 tensor_count | u64 kv_count
//   kv_count x { string key | u32 value_type | value }
//   tensor_count x { string name | u32 n_dims | u64 dims[n_dims] | u32 type | u64 offset }
//   padding to general.alignment (default 32) | tensor data (offsets relative to this point)
// where string = { u64 length | bytes } and an array value = { u32 elem_type | u64 n | n values }.
// Every count and length is bounded by the bytes left in the file before anything is allocated.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <bit>
#include <cstring>
#include <limits>
#include <new>
#include <string>
#include <utility>

#include "gguf/gguf_data.h"
#include "snapkv/error.h"

namespace snapkv::detail {
namespace {

constexpr uint32_t kMagic = 0x46554747u;                     // bytes 'G' 'G' 'U' 'F' read as little-endian u32
constexpr int kMaxArrayDepth = 8;                            // arrays of arrays nest at most this deep
constexpr uint64_t kMaxKeyLength = 65535;                    // spec: keys are at most 2^16 - 1 bytes
constexpr uint32_t kMaxDims = 4;                             // GGML_MAX_DIMS
constexpr uint64_t kMinKVBytes = 8 + 4 + 1;                  // empty key, u8 value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // empty name, 1 dim

/// Smallest encoding of one value of type `t` (used to bound array lengths).
uint64_t min_value_bytes(GGUFValueType t) {
  switch (t) {
    case GGUFValueType::UINT8:
    case GGUFValueType::INT8:
    case GGUFValueType::BOOL:
      return 1;
    case GGUFValueType::UINT16:
    case GGUFValueType::INT16:
      return 2;
    case GGUFValueType::UINT32:
    case GGUFValueType::INT32:
    case GGUFValueType::FLOAT32:
      return 4;
    case GGUFValueType::UINT64:
    case GGUFValueType::INT64:
    case GGUFValueType::FLOAT64:
    case GGUFValueType::STRING:
      return 8;
    case GGUFValueType::ARRAY:
      return 12;
  }
  return 1;
}

bool valid_value_type(uint32_t t) { return t <= static_cast<uint32_t>(GGUFValueType::FLOAT64); }

/// Where a metadata value sits, for error messages (formatted only on failure).
struct ValueCtx {
  std::string_view key;
  int64_t element = -1;  ///< index inside the innermost array, or -1 for the top-level value
  std::string describe() const {
    if (element < 0) return fmt::format("value of metadata key '{}'", key);
    return fmt::format("element {} of metadata key '{}'", element, key);
  }
};

class Parser {
 public:
  explicit Parser(GGUFData& d) : d_(d) {}

  void run() {
    parse_header();
    parse_metadata();
    parse_alignment();
    parse_tensor_infos();
    place_tensors();
  }

 private:
  GGUFData& d_;
  uint64_t pos_ = 0;
  uint64_t n_tensors_ = 0;
  uint64_t n_kv_ = 0;

  uint64_t left() const { return d_.size - pos_; }

  template <typename... Args>
  [[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) const {
    throw Error(d_.name + ": " + fmt::format(f, std::forward<Args>(args)...));
  }

  /// Throws unless `n` more bytes are available; `what()` names the field being read.
  template <typename What>
  void need(uint64_t n, const What& what) const {
    if (n > left()) {
      fail("unexpected end of file reading {} (offset={}, need {} bytes, file size {})", what(), pos_, n, d_.size);
    }
  }

  template <typename T, typename What>
  T read(const What& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, d_.base + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  /// Reads a GGUF string (u64 length + bytes) as a view into the image.
  template <typename What>
  std::string_view read_string(const What& what) {
    const uint64_t len = read<uint64_t>(what);
    if (len > left()) {
      fail("string length of {} exceeds the rest of the file (length={}, {} bytes left)", what(), len, left());
    }
    std::string_view s(reinterpret_cast<const char*>(d_.base + pos_), static_cast<size_t>(len));
    pos_ += len;
    return s;
  }

  void parse_header() {
    const auto magic = read<uint32_t>([] { return std::string("magic"); });
    if (magic != kMagic) {
      std::string shown;
      for (int k = 0; k < 4; ++k) {
        const char c = static_cast<char>((magic >> (8 * k)) & 0xffu);
        shown += (c >= 0x20 && c < 0x7f) ? c : '.';
      }
      fail("not a GGUF file: bad magic (magic=0x{:08x} \"{}\", expected \"GGUF\")", magic, shown);
    }
    const auto version = read<uint32_t>([] { return std::string("version"); });
    if (version != 2 && version != 3) {
      const uint32_t swapped = __builtin_bswap32(version);
      if (swapped >= 1 && swapped <= 3) {
        fail("big-endian GGUF files are not supported (version=0x{:08x})", version);
      }
      fail("unsupported GGUF version {} (version={}; snapkv reads versions 2 and 3)", version, version);
    }
    d_.version = version;
    n_tensors_ = read<uint64_t>([] { return std::string("tensor_count"); });
    n_kv_ = read<uint64_t>([] { return std::string("kv_count"); });
    // Bound the counts by the bytes left before reserving anything.
    if (n_kv_ > left() / kMinKVBytes) {
      fail("metadata count too large for the file size (kv_count={}, at most {} fit in {} bytes)", n_kv_,
           left() / kMinKVBytes, left());
    }
    const uint64_t after_kv = left() - n_kv_ * kMinKVBytes;
    if (n_tensors_ > after_kv / kMinTensorInfoBytes) {
      fail("tensor count too large for the file size (tensor_count={}, at most {} fit in {} bytes)", n_tensors_,
           after_kv / kMinTensorInfoBytes, after_kv);
    }
  }

  void parse_metadata() {
    d_.metadata.reserve(static_cast<size_t>(n_kv_));
    d_.kv_index.reserve(static_cast<size_t>(n_kv_));
    for (uint64_t i = 0; i < n_kv_; ++i) {
      const auto key_what = [i] { return fmt::format("key of metadata #{}", i); };
      const std::string_view key = read_string(key_what);
      if (key.empty()) fail("metadata #{} has an empty key (key length=0)", i);
      if (key.size() > kMaxKeyLength) {
        fail("metadata #{} key too long (key length={}, max {})", i, key.size(), kMaxKeyLength);
      }
      const auto [it, inserted] = d_.kv_index.emplace(key, static_cast<size_t>(i));
      if (!inserted) fail("duplicate metadata key '{}' (key={}, entries #{} and #{})", key, key, it->second, i);

      const auto type_what = [key] { return fmt::format("value type of metadata key '{}'", key); };
      const auto type = read<uint32_t>(type_what);
      if (!valid_value_type(type)) fail("metadata key '{}' has an unknown value type (type={})", key, type);
      GGUFValue v;
      parse_value(v, static_cast<GGUFValueType>(type), ValueCtx{key, -1}, 0);
      d_.metadata.emplace_back(std::string(key), std::move(v));
    }
  }

  void parse_value(GGUFValue& v, GGUFValueType t, const ValueCtx& ctx, int depth) {
    v.type = t;
    const auto what = [&ctx] { return ctx.describe(); };
    switch (t) {
      case GGUFValueType::UINT8:
        v.u = read<uint8_t>(what);
        break;
      case GGUFValueType::INT8:
        v.i = read<int8_t>(what);
        break;
      case GGUFValueType::UINT16:
        v.u = read<uint16_t>(what);
        break;
      case GGUFValueType::INT16:
        v.i = read<int16_t>(what);
        break;
      case GGUFValueType::UINT32:
        v.u = read<uint32_t>(what);
        break;
      case GGUFValueType::INT32:
        v.i = read<int32_t>(what);
        break;
      case GGUFValueType::UINT64:
        v.u = read<uint64_t>(what);
        break;
      case GGUFValueType::INT64:
        v.i = read<int64_t>(what);
        break;
      case GGUFValueType::FLOAT32:
        v.f = static_cast<double>(read<float>(what));
        break;
      case GGUFValueType::FLOAT64:
        v.f = read<double>(what);
        break;
      case GGUFValueType::BOOL: {
        const auto b = read<uint8_t>(what);
        if (b > 1) fail("invalid bool in {} (value={})", ctx.describe(), b);
        v.u = b;
        break;
      }
      case GGUFValueType::STRING:
        v.str = read_string(what);
        break;
      case GGUFValueType::ARRAY:
        parse_array(v, ctx, depth + 1);
        break;
    }
  }

  void parse_array(GGUFValue& v, const ValueCtx& ctx, int depth) {
    if (depth > kMaxArrayDepth) {
      fail("arrays nested too deeply in {} (depth={}, max {})", ctx.describe(), depth, kMaxArrayDepth);
    }
    const auto what = [&ctx] { return "array header of " + ctx.describe(); };
    const auto elem = read<uint32_t>(what);
    if (!valid_value_type(elem)) fail("unknown array element type in {} (elem_type={})", ctx.describe(), elem);
    const auto et = static_cast<GGUFValueType>(elem);
    const auto n = read<uint64_t>(what);
    const uint64_t max_n = left() / min_value_bytes(et);
    if (n > max_n) {
      fail("array length of {} exceeds the rest of the file (length={}, at most {} {} values fit)", ctx.describe(), n,
           max_n, gguf_value_type_name(et));
    }
    v.elem_type = et;
    v.arr.resize(static_cast<size_t>(n));
    ValueCtx sub{ctx.key, 0};
    for (uint64_t j = 0; j < n; ++j) {
      sub.element = static_cast<int64_t>(j);
      parse_value(v.arr[static_cast<size_t>(j)], et, sub, depth);
    }
  }

  void parse_alignment() {
    const auto it = d_.kv_index.find("general.alignment");
    if (it == d_.kv_index.end()) return;
    const GGUFValue& v = d_.metadata[it->second].second;
    if (v.type != GGUFValueType::UINT32) {
      fail("general.alignment has type {}, expected uint32 (general.alignment type={})", gguf_value_type_name(v.type),
           gguf_value_type_name(v.type));
    }
    if (v.u == 0 || !std::has_single_bit(v.u)) {
      fail("general.alignment must be a nonzero power of two (general.alignment={})", v.u);
    }
    d_.alignment = v.u;
  }

  void parse_tensor_infos() {
    d_.tensors.reserve(static_cast<size_t>(n_tensors_));
    d_.tensor_index.reserve(static_cast<size_t>(n_tensors_));
    for (uint64_t i = 0; i < n_tensors_; ++i) {
      const std::string_view name = read_string([i] { return fmt::format("name of tensor #{}", i); });
      if (name.empty()) fail("tensor #{} has an empty name (name length=0)", i);
      const auto [it, inserted] = d_.tensor_index.emplace(name, static_cast<size_t>(i));
      if (!inserted) fail("duplicate tensor name '{}' (name={}, tensors #{} and #{})", name, name, it->second, i);

      GGUFTensorInfo t;
      t.name = std::string(name);
      const auto n_dims = read<uint32_t>([name] { return fmt::format("n_dims of tensor '{}'", name); });
      if (n_dims < 1 || n_dims > kMaxDims) {
        fail("tensor '{}' has a bad number of dimensions (n_dims={}, expected 1..{})", name, n_dims, kMaxDims);
      }
      t.dims.resize(n_dims);
      int64_t n_elem = 1;
      for (uint32_t j = 0; j < n_dims; ++j) {
        const auto d = read<uint64_t>([name, j] { return fmt::format("dims[{}] of tensor '{}'", j, name); });
        if (d == 0) fail("tensor '{}' has an empty dimension (dims[{}]=0)", name, j);
        if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          fail("tensor '{}' dimension too large (dims[{}]={})", name, j, d);
        }
        t.dims[j] = static_cast<int64_t>(d);
        if (__builtin_mul_overflow(n_elem, t.dims[j], &n_elem)) {
          fail("tensor '{}' element count overflows int64 (dims=[{}])", name,
               fmt::join(t.dims.begin(), t.dims.begin() + j + 1, ", "));
        }
      }
      t.type = read<uint32_t>([name] { return fmt::format("type of tensor '{}'", name); });
      if (!ggml_type_known(t.type)) fail("tensor '{}' has an unknown tensor type (type={})", name, t.type);
      const GGMLTypeTraits& tr = ggml_type_traits(t.type);
      if (t.dims[0] % tr.block_size != 0) {
        fail("tensor '{}' row size is not a multiple of the {} block size {} (dims[0]={})", name, tr.name,
             tr.block_size, t.dims[0]);
      }
      uint64_t row_bytes = 0;  // (dims[0] / block) * type_size may exceed 2^64 for plain types
      const uint64_t n_rows = static_cast<uint64_t>(n_elem / t.dims[0]);
      if (__builtin_mul_overflow(static_cast<uint64_t>(t.dims[0] / tr.block_size), tr.type_size, &row_bytes) ||
          __builtin_mul_overflow(row_bytes, n_rows, &t.nbytes)) {
        fail("tensor '{}' byte size overflows (dims=[{}], type={})", name, fmt::join(t.dims, ", "), tr.name);
      }
      t.offset = read<uint64_t>([name] { return fmt::format("offset of tensor '{}'", name); });
      if (t.offset % d_.alignment != 0) {
        fail("tensor '{}' data offset is not a multiple of the alignment {} (offset={})", name, d_.alignment, t.offset);
      }
      d_.tensors.push_back(std::move(t));
    }
  }

  /// Data section = end of the tensor infos rounded up to the alignment; every tensor's bytes must lie inside
  /// the file. With no tensors the padding may be missing (vocab-only files end right after the metadata).
  void place_tensors() {
    const uint64_t a = d_.alignment;
    d_.data_offset = (pos_ + a - 1) / a * a;  // pos_ <= size < 2^63, a <= 2^31: no overflow
    for (GGUFTensorInfo& t : d_.tensors) {
      uint64_t start = 0;
      if (__builtin_add_overflow(d_.data_offset, t.offset, &start)) {
        fail("tensor '{}' data offset lies past end of file (offset={}, data section at {}, file size {})", t.name,
             t.offset, d_.data_offset, d_.size);
      }
      if (start > d_.size || t.nbytes > d_.size - start) {
        fail("tensor '{}' data [offset {}, {} bytes] extends past end of file (size {})", t.name, start, t.nbytes,
             d_.size);
      }
      t.data = d_.base + start;
    }
  }
};

}  // namespace

void parse_gguf(GGUFData& out) {
  try {
    Parser(out).run();
  } catch (const std::bad_alloc&) {
    // Counts are bounded by the file size, but a large file of tiny array elements can still
    // need more memory than there is.
    throw Error(out.name + ": out of memory while parsing the metadata (file size=" + std::to_string(out.size) + ")");
  }
}

}  // namespace snapkv::detail
