// Shared helpers of the C API tests: RAII owners of the C handles, the stories260K engine, and a
// token callback that records what it is given. These tests link libsnapkv.so only (no internal
// module library), so they also check what the shared library exports.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "snapkv/snapkv_c.h"
#include "test_util.h"

namespace snapkv::capitest {

struct EngineFree {
  void operator()(snapkv_engine* e) const { snapkv_engine_free(e); }
};
struct SequenceFree {
  void operator()(snapkv_sequence* s) const { snapkv_sequence_free(s); }
};
struct SamplerFree {
  void operator()(snapkv_sampler* s) const { snapkv_sampler_free(s); }
};
using EnginePtr = std::unique_ptr<snapkv_engine, EngineFree>;
using SequencePtr = std::unique_ptr<snapkv_sequence, SequenceFree>;
using SamplerPtr = std::unique_ptr<snapkv_sampler, SamplerFree>;

inline std::string stories_path() { return (test::shared_dir() / "models" / "stories260K.gguf").string(); }

/// stories260K through the C API (fails the test if it does not load).
inline EnginePtr load_stories(int32_t threads = 2) {
  snapkv_engine* e = nullptr;
  const snapkv_status st = snapkv_engine_load(stories_path().c_str(), threads, &e);
  EXPECT_EQ(st, SNAPKV_OK) << snapkv_last_error();
  return EnginePtr(e);
}

inline SequencePtr new_sequence(const snapkv_engine* e, int64_t n_ctx = 0, snapkv_kv_type kv = SNAPKV_KV_F16) {
  snapkv_sequence* s = nullptr;
  EXPECT_EQ(snapkv_sequence_new(e, n_ctx, kv, &s), SNAPKV_OK) << snapkv_last_error();
  return SequencePtr(s);
}

/// Token ids of `text` via snapkv_tokenize (size query first).
inline std::vector<int32_t> tokenize(const snapkv_engine* e, const std::string& text, bool add_special = true) {
  size_t n = 0;
  const snapkv_status q = snapkv_tokenize(e, text.data(), text.size(), add_special, 0, nullptr, 0, &n);
  EXPECT_TRUE(q == SNAPKV_OK || q == SNAPKV_ERR_BUFFER_TOO_SMALL) << snapkv_last_error();
  std::vector<int32_t> ids(n);
  EXPECT_EQ(snapkv_tokenize(e, text.data(), text.size(), add_special, 0, ids.data(), ids.size(), &n), SNAPKV_OK);
  return ids;
}

/// What a generation streamed: the tokens (without the final -1 call) and the text.
struct Streamed {
  std::vector<int32_t> tokens;
  std::string text;
  int final_calls = 0;
  int stop_after = -1;  ///< return nonzero once this many tokens arrived (-1: never)
};

inline int record(void* user, int32_t token, const char* text, size_t len) {
  auto* s = static_cast<Streamed*>(user);
  s->text.append(text, len);
  if (token < 0) {
    ++s->final_calls;
    return 0;
  }
  s->tokens.push_back(token);
  return s->stop_after >= 0 && static_cast<int>(s->tokens.size()) >= s->stop_after ? 1 : 0;
}

/// An enum holding an arbitrary int, as a C caller may pass (a static_cast would be undefined
/// for values outside the enumerators' range).
template <class E>
E c_enum(int v) {
  E e;
  static_assert(sizeof e == sizeof v);
  std::memcpy(&e, &v, sizeof v);
  return e;
}

/// Greedy settings: temp 0, ignore EOS, n tokens.
inline snapkv_generate_params greedy(int64_t n) {
  snapkv_generate_params p = snapkv_generate_params_default();
  p.n_predict = n;
  p.temp = 0.0f;
  p.ignore_eos = 1;
  return p;
}

/// The message of the last failure names the function and contains `part`.
inline void expect_error(snapkv_status got, snapkv_status want, const std::string& fn, const std::string& part = "") {
  EXPECT_EQ(got, want) << snapkv_status_name(got) << ": " << snapkv_last_error();
  const std::string msg = snapkv_last_error();
  EXPECT_EQ(msg.rfind(fn + ": ", 0), 0u) << msg;
  if (!part.empty()) {
    EXPECT_NE(msg.find(part), std::string::npos) << "'" << part << "' not in: " << msg;
  }
}

}  // namespace snapkv::capitest
