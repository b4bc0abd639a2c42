// Shared fixtures of the eval tests: engines whose tokenizers the generators use (the tiny
// shared models always; SmolLM2 from the model cache when present).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "snapkv/snapkv.h"
#include "test_util.h"

namespace snapkv::etest {

inline std::shared_ptr<const Engine> load_engine(const std::filesystem::path& p, int threads = 2) {
  EngineOptions o;
  o.n_threads = threads;
  return Engine::load(p.string(), o);
}

/// stories260K (F32, SPM vocabulary of 512: long texts take many tokens; context 512).
inline std::shared_ptr<const Engine> stories() {
  static auto e = load_engine(test::shared_dir() / "models" / "stories260K.gguf");
  return e;
}

/// llama-2-tiny-random: Llama 2's real SPM tokenizer (32000 tokens), random weights.
inline std::shared_ptr<const Engine> llama_tiny() {
  static auto e = load_engine(test::shared_dir() / "models" / "llama-2-tiny-random.gguf");
  return e;
}

/// SmolLM2-135M-Instruct (byte-level BPE, ChatML template), or nullptr when not in the cache.
inline std::shared_ptr<const Engine> smollm2() {
  static auto e = std::filesystem::exists(test::smollm2_path()) ? load_engine(test::smollm2_path())
                                                                : std::shared_ptr<const Engine>{};
  return e;
}

}  // namespace snapkv::etest
