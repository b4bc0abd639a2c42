// libFuzzer target: parse an arbitrary byte string as GGUF and touch everything the parser exposes.
// The only allowed failure is snapkv::Error; crashes, sanitizer reports and broken invariants
// (checked with __builtin_trap) are bugs.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "gguf/gguf.h"
#include "snapkv/error.h"

namespace {

volatile uint64_t g_sink = 0;

void check(bool ok) {
  if (!ok) __builtin_trap();
}

/// Reads every byte a value refers to (strings through their views, arrays recursively).
void touch(const snapkv::GGUFValue& v) {
  uint64_t s = v.u + static_cast<uint64_t>(v.i) + static_cast<uint64_t>(v.f != 0.0);
  for (char c : v.str) s += static_cast<unsigned char>(c);
  for (const auto& e : v.arr) {
    check(e.type == v.elem_type);
    touch(e);
  }
  g_sink = g_sink + s;
}

template <typename F>
void try_get(F&& f) {
  try {
    f();
  } catch (const snapkv::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const snapkv::GGUFFile g = snapkv::GGUFFile::from_memory(std::span<const uint8_t>(data, size), "fuzz.gguf");
    check(g.version() == 2 || g.version() == 3);
    check(g.file_size() == size);
    check(g.alignment() != 0 && (g.alignment() & (g.alignment() - 1)) == 0);
    check(g.data_offset() % g.alignment() == 0);
    for (const auto& kv : g.metadata()) {
      const std::string& key = kv.first;  // (clang 14 cannot capture structured bindings)
      const snapkv::GGUFValue& value = kv.second;
      check(g.find(key) == &value);
      touch(value);
      try_get([&] { g_sink = g_sink + g.get_u64(key); });
      try_get([&] { g_sink = g_sink + static_cast<uint64_t>(g.get_i64(key)); });
      try_get([&] { g_sink = g_sink + static_cast<uint64_t>(g.get_f64(key) != 0.0); });
      try_get([&] { g_sink = g_sink + g.get_bool(key); });
      try_get([&] { g_sink = g_sink + g.get_string(key).size(); });
      try_get([&] { g_sink = g_sink + g.get_string_array(key).size(); });
      try_get([&] { g_sink = g_sink + g.get_f32_array(key).size(); });
      try_get([&] { g_sink = g_sink + g.get_i64_array(key).size(); });
    }
    for (const auto& t : g.tensors()) {
      check(g.find_tensor(t.name) == &t);
      check(!t.dims.empty() && t.dims.size() <= 4);
      check(t.n_elements() >= 1);
      check(t.nbytes >= 1 && t.offset % g.alignment() == 0);
      check(g.data_offset() + t.offset + t.nbytes <= g.file_size());
      g_sink = g_sink + t.data[0] + t.data[t.nbytes - 1];
    }
  } catch (const snapkv::Error&) {
  }
  return 0;
}
