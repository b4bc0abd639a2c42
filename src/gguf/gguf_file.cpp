// snapkv: GGUFFile — owns the mapped (or copied) image and answers typed metadata queries.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <new>

#include "gguf/gguf.h"
#include "gguf/gguf_data.h"
#include "snapkv/error.h"

namespace snapkv {

const char* gguf_value_type_name(GGUFValueType t) {
  switch (t) {
    case GGUFValueType::UINT8:
      return "uint8";
    case GGUFValueType::INT8:
      return "int8";
    case GGUFValueType::UINT16:
      return "uint16";
    case GGUFValueType::INT16:
      return "int16";
    case GGUFValueType::UINT32:
      return "uint32";
    case GGUFValueType::INT32:
      return "int32";
    case GGUFValueType::FLOAT32:
      return "float32";
    case GGUFValueType::BOOL:
      return "bool";
    case GGUFValueType::STRING:
      return "string";
    case GGUFValueType::ARRAY:
      return "array";
    case GGUFValueType::UINT64:
      return "uint64";
    case GGUFValueType::INT64:
      return "int64";
    case GGUFValueType::FLOAT64:
      return "float64";
  }
  return "unknown";
}

namespace {

bool is_unsigned(GGUFValueType t) {
  return t == GGUFValueType::UINT8 || t == GGUFValueType::UINT16 || t == GGUFValueType::UINT32 ||
         t == GGUFValueType::UINT64;
}
bool is_signed(GGUFValueType t) {
  return t == GGUFValueType::INT8 || t == GGUFValueType::INT16 || t == GGUFValueType::INT32 ||
         t == GGUFValueType::INT64;
}

std::string type_desc(const GGUFValue& v) {
  if (v.type == GGUFValueType::ARRAY) return fmt::format("array of {}", gguf_value_type_name(v.elem_type));
  return gguf_value_type_name(v.type);
}

constexpr std::align_val_t kBufferAlign{64};

}  // namespace

bool GGUFValue::is_integer() const { return is_unsigned(type) || is_signed(type); }

int64_t GGUFTensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;  // validated by the parser not to overflow
  return n;
}

struct GGUFFile::Impl : detail::GGUFData {
  void* map = nullptr;  ///< mmap'ed file (open)
  size_t map_len = 0;
  uint8_t* owned = nullptr;  ///< 64-byte aligned copy (from_memory)

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl() {
    if (map != nullptr) ::munmap(map, map_len);
    if (owned != nullptr) ::operator delete[](owned, kBufferAlign);
  }

  [[noreturn]] void fail_key(std::string_view key, const std::string& what) const {
    throw Error(fmt::format("{}: metadata key '{}' {}", name, key, what));
  }

  const GGUFValue& require(std::string_view key) const {
    const auto it = kv_index.find(key);
    if (it == kv_index.end()) fail_key(key, "is missing");
    return metadata[it->second].second;
  }

  // Scalar conversions shared by the getters and the array getters; `where` is "" or " element N".
  uint64_t to_u64(const GGUFValue& v, std::string_view key, const std::string& where) const {
    if (is_unsigned(v.type) || v.type == GGUFValueType::BOOL) return v.u;
    if (is_signed(v.type)) {
      if (v.i < 0) fail_key(key, fmt::format("{}value {} out of range", where.empty() ? "" : where + " ", v.i));
      return static_cast<uint64_t>(v.i);
    }
    fail_key(key, fmt::format("{}has type {}, expected an integer", where.empty() ? "" : where + " ", type_desc(v)));
  }

  int64_t to_i64(const GGUFValue& v, std::string_view key, const std::string& where) const {
    if (is_signed(v.type)) return v.i;
    if (is_unsigned(v.type) || v.type == GGUFValueType::BOOL) {
      if (v.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        fail_key(key, fmt::format("{}value {} out of range", where.empty() ? "" : where + " ", v.u));
      }
      return static_cast<int64_t>(v.u);
    }
    fail_key(key, fmt::format("{}has type {}, expected an integer", where.empty() ? "" : where + " ", type_desc(v)));
  }

  double to_f64(const GGUFValue& v, std::string_view key, const std::string& where) const {
    if (v.is_float()) return v.f;
    if (is_unsigned(v.type)) return static_cast<double>(v.u);
    if (is_signed(v.type)) return static_cast<double>(v.i);
    fail_key(key, fmt::format("{}has type {}, expected a number", where.empty() ? "" : where + " ", type_desc(v)));
  }

  bool to_bool(const GGUFValue& v, std::string_view key) const {
    if (v.type != GGUFValueType::BOOL) fail_key(key, fmt::format("has type {}, expected a bool", type_desc(v)));
    return v.u != 0;
  }

  std::string_view to_string(const GGUFValue& v, std::string_view key) const {
    if (v.type != GGUFValueType::STRING) fail_key(key, fmt::format("has type {}, expected a string", type_desc(v)));
    return v.str;
  }

  const GGUFValue& require_array(std::string_view key, bool (*elem_ok)(GGUFValueType), const char* expected) const {
    const GGUFValue& v = require(key);
    if (v.type != GGUFValueType::ARRAY || !elem_ok(v.elem_type)) {
      fail_key(key, fmt::format("has type {}, expected an array of {}", type_desc(v), expected));
    }
    return v;
  }
};

GGUFFile::GGUFFile() : impl_(std::make_unique<Impl>()) {}
GGUFFile::GGUFFile(GGUFFile&&) noexcept = default;
GGUFFile& GGUFFile::operator=(GGUFFile&&) noexcept = default;
GGUFFile::~GGUFFile() = default;

GGUFFile GGUFFile::open(const std::string& path) {
  GGUFFile f;
  Impl& m = *f.impl_;
  m.name = path;
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever, before the
  // regular-file check below could refuse it (regular files ignore the flag).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw Error(fmt::format("{}: cannot open GGUF file: {}", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw Error(fmt::format("{}: cannot stat GGUF file: {}", path, std::strerror(e)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(fmt::format("{}: not a regular file", path));
  }
  m.size = static_cast<uint64_t>(st.st_size);
  if (m.size > 0) {
    void* p = ::mmap(nullptr, static_cast<size_t>(m.size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      throw Error(fmt::format("{}: cannot mmap {} bytes: {}", path, m.size, std::strerror(e)));
    }
    m.map = p;
    m.map_len = static_cast<size_t>(m.size);
    m.base = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  detail::parse_gguf(m);
  return f;
}

GGUFFile GGUFFile::from_memory(std::span<const uint8_t> bytes, const std::string& name) {
  GGUFFile f;
  Impl& m = *f.impl_;
  m.name = name;
  m.size = bytes.size();
  if (!bytes.empty()) {
    // Exactly-sized allocation so that sanitizers catch any read past the image.
    m.owned = static_cast<uint8_t*>(::operator new[](bytes.size(), kBufferAlign));
    std::memcpy(m.owned, bytes.data(), bytes.size());
    m.base = m.owned;
  }
  detail::parse_gguf(m);
  return f;
}

const std::string& GGUFFile::path() const { return impl_->name; }
uint32_t GGUFFile::version() const { return impl_->version; }
uint64_t GGUFFile::file_size() const { return impl_->size; }
bool GGUFFile::mapped() const { return impl_->map != nullptr; }
std::span<const uint8_t> GGUFFile::bytes() const { return {impl_->base, static_cast<size_t>(impl_->size)}; }
uint64_t GGUFFile::alignment() const { return impl_->alignment; }
uint64_t GGUFFile::data_offset() const { return impl_->data_offset; }

const std::vector<std::pair<std::string, GGUFValue>>& GGUFFile::metadata() const { return impl_->metadata; }

const GGUFValue* GGUFFile::find(std::string_view key) const {
  const auto it = impl_->kv_index.find(key);
  return it == impl_->kv_index.end() ? nullptr : &impl_->metadata[it->second].second;
}

uint64_t GGUFFile::get_u64(std::string_view key) const { return impl_->to_u64(impl_->require(key), key, ""); }
int64_t GGUFFile::get_i64(std::string_view key) const { return impl_->to_i64(impl_->require(key), key, ""); }
double GGUFFile::get_f64(std::string_view key) const { return impl_->to_f64(impl_->require(key), key, ""); }
bool GGUFFile::get_bool(std::string_view key) const { return impl_->to_bool(impl_->require(key), key); }
std::string_view GGUFFile::get_string(std::string_view key) const { return impl_->to_string(impl_->require(key), key); }

std::optional<uint64_t> GGUFFile::get_u64_opt(std::string_view key) const {
  const GGUFValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  return impl_->to_u64(*v, key, "");
}
std::optional<double> GGUFFile::get_f64_opt(std::string_view key) const {
  const GGUFValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  return impl_->to_f64(*v, key, "");
}
std::optional<bool> GGUFFile::get_bool_opt(std::string_view key) const {
  const GGUFValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  return impl_->to_bool(*v, key);
}
std::optional<std::string_view> GGUFFile::get_string_opt(std::string_view key) const {
  const GGUFValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  return impl_->to_string(*v, key);
}

std::vector<std::string_view> GGUFFile::get_string_array(std::string_view key) const {
  const GGUFValue& v = impl_->require_array(
      key, [](GGUFValueType t) { return t == GGUFValueType::STRING; }, "string");
  std::vector<std::string_view> out;
  out.reserve(v.arr.size());
  for (const GGUFValue& e : v.arr) out.push_back(e.str);
  return out;
}

std::vector<float> GGUFFile::get_f32_array(std::string_view key) const {
  const GGUFValue& v = impl_->require_array(
      key,
      [](GGUFValueType t) {
        return t == GGUFValueType::FLOAT32 || t == GGUFValueType::FLOAT64 || is_unsigned(t) || is_signed(t);
      },
      "numbers");
  std::vector<float> out;
  out.reserve(v.arr.size());
  for (const GGUFValue& e : v.arr) {
    if (e.is_float()) {
      out.push_back(static_cast<float>(e.f));
    } else if (is_unsigned(e.type)) {
      out.push_back(static_cast<float>(e.u));
    } else {
      out.push_back(static_cast<float>(e.i));
    }
  }
  return out;
}

std::vector<int64_t> GGUFFile::get_i64_array(std::string_view key) const {
  const GGUFValue& v = impl_->require_array(
      key, [](GGUFValueType t) { return is_unsigned(t) || is_signed(t) || t == GGUFValueType::BOOL; }, "integers");
  std::vector<int64_t> out;
  out.reserve(v.arr.size());
  for (size_t j = 0; j < v.arr.size(); ++j) {
    const GGUFValue& e = v.arr[j];
    if (is_signed(e.type)) {
      out.push_back(e.i);
    } else {
      out.push_back(impl_->to_i64(e, key, fmt::format("element {}", j)));
    }
  }
  return out;
}

const std::vector<GGUFTensorInfo>& GGUFFile::tensors() const { return impl_->tensors; }

const GGUFTensorInfo* GGUFFile::find_tensor(std::string_view name) const {
  const auto it = impl_->tensor_index.find(name);
  return it == impl_->tensor_index.end() ? nullptr : &impl_->tensors[it->second];
}

const GGUFTensorInfo& GGUFFile::tensor(std::string_view name) const {
  const GGUFTensorInfo* t = find_tensor(name);
  if (t == nullptr) throw Error(fmt::format("{}: tensor '{}' is missing", impl_->name, name));
  return *t;
}

}  // namespace snapkv
